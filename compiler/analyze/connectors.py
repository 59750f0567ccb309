"""Sources and sinks: connectors and their options, declared columns, datagen's field
options and watermarks.

A source or sink that passes its checks lands in ``ctx.sources`` / ``ctx.sinks``; one
that does not is still marked defined, so later references to it say no more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlglot import exp

from flowc import ast, catalog
from flowc.analyze.context import Context
from flowc.analyze.settings import read_hints
from flowc.diagnostics import did_you_mean, one_of
from flowc.errorcodes import Code
from flowc.program import Column, Computed, Hints, Schema, SinkDef, SourceDef, Watermark
from flowc.spans import Span
from flowc.sql import habits
from flowc.sql.functions import is_aggregate
from flowc.sql.habits import check_source_path
from flowc.sql.sql_forms import is_proctime_call
from flowc.sql.sqltypes import TIMESTAMP, UNKNOWN, Scope, TypeSyntaxError, normalize_type
from flowc.trust import policy as trust
from flowc.vocabulary import LiteralKind


def check_source(ctx: Context, node: ast.CreateSource) -> None:
    """Columns, connector and options, what the connector can produce, and the watermark."""
    name = node.name.value
    ctx.defined.add(name)
    if node.bounded and not _table_reads_files(ctx, node):
        return
    schema = _columns(ctx, node.columns, name)
    written = node.options
    versioning = [o for o in written if node.bounded and o.key in _VERSION_OPTIONS]
    if versioning:
        written = tuple(o for o in written if o not in versioning)
    by_key = _versioned_by_key(node) if not versioning else []
    connector, options, hints = _connector_options(ctx, "source", node.name, written, node.span)
    versions = _versions(ctx, node, schema, versioning or by_key)
    if schema is not None and not schema:
        ctx.reporter.error(
            Code.E0407,
            f"source '{name}' declares no columns",
            node.name.span,
            help="declare the columns the source produces: CREATE SOURCE s (col TYPE, ...)",
        )
        schema = None
    if schema is not None and connector is not None:
        _check_source_columns(ctx, node, connector.name, schema, options)
    if connector is not None and connector.name == "files" and "path" in options:
        path, path_option = options["path"]
        # Untrusted: never look at a path outside the sandbox (E0953 says why).
        if trust.path_allowed(ctx.policy, ctx.file, str(path)):
            check_source_path(ctx.file, name, path_option, path, ctx.reporter, ctx.policy.base_dir)
    if not _source_key(ctx, node, schema, connector.name if connector is not None else None):
        return
    proctime, computed, proctime_ok = _proctime(ctx, node, schema)
    watermark = None
    if schema is not None and proctime_ok and not by_key:
        read = (*schema, *(Column(c.name, c.type) for c in computed))
        watermark = _watermark(ctx, node, read)
    if node.bounded and not _check_table(ctx, node, connector, options, bool(by_key)):
        return
    if schema is None or connector is None or ctx.definitions[name].node is not node:
        return
    if not proctime_ok:
        return
    ctx.sources[name] = SourceDef(
        name=name,
        schema=schema,
        watermark=watermark,
        connector=connector.name,
        options=tuple(sorted((k, v) for k, (v, _) in options.items())),
        hints=hints,
        span=node.span,
        bounded=node.bounded,
        proctime=proctime,
        version_key=versions[0],
        version_time=versions[1],
        computed=computed,
        not_null=tuple(c.name.value for c in node.columns if c.not_null is not None),
        written_options={k: o for k, (_, o) in options.items()},
        written_types={c.name.value: c.type for c in node.columns},
        declared_order=_declared_order(node, proctime),
        primary_key=(
            tuple(c.value for c in node.primary_key.columns)
            if node.primary_key is not None and not node.bounded
            else ()
        ),
    )


def _declared_order(node: ast.CreateSource, proctime: str | None) -> tuple[str, ...]:
    """The source's columns as declared, where PROCTIME() stands before another column
    (other computed columns stand after the read ones: E0290); empty where flowc's order,
    read columns, computed ones, then the processing time, is the declared one."""
    if proctime is None:
        return ()
    written = sorted(
        [(c.span.line, c.span.column, c.name.value) for c in node.columns]
        + [(c.span.line, c.span.column, c.name.value) for c in node.computed]
    )
    order = tuple(name for _, _, name in written)
    computed = [c.name.value for c in node.computed if c.name.value != proctime]
    flowc_order = (*(c.name.value for c in node.columns), *computed, proctime)
    return order if order != flowc_order else ()


#: Connectors whose Flink counterparts (filesystem, datagen) read a table with a PRIMARY
#: KEY as they read any: every row an insert (a plain scan, no ChangelogNormalize: asked
#: of Flink 2.3's planner); the key is the user's declaration, not enforced.
_INSERT_ONLY_WITH_KEY = frozenset({"files", "datagen"})


def _source_key(
    ctx: Context, node: ast.CreateSource, schema: Schema | None, connector: str | None
) -> bool:
    """A PRIMARY KEY on a dimension table, or on a stream whose connector Flink reads as
    inserts whatever its key (files, datagen), names its columns and changes nothing:
    Flink's lookup join meets every row of the join's key whatever the primary key, and
    its filesystem and datagen scans emit inserts. On another stream (Flink's Kafka, whose
    plain formats refuse a key, or an upsert connector) it is E0293: flowc's sources
    append."""
    key = node.primary_key
    if key is None:
        return True
    if not node.bounded and connector not in _INSERT_ONLY_WITH_KEY:
        ctx.reporter.error(
            Code.E0293,
            f"source '{node.name.value}' appends rows: flowc cannot read it as an upsert "
            "stream keyed by its PRIMARY KEY",
            key.span,
            help="remove the PRIMARY KEY to read every row as an insert (Flink's Kafka "
            "refuses a key with a plain format too); or, to look rows up by key, join the "
            "table FOR SYSTEM_TIME AS OF the stream's processing time",
        )
        return False
    declared = {c.name for c in schema or ()}
    for column in key.columns:
        if schema is not None and column.value not in declared:
            ctx.reporter.error(
                Code.E0293,
                f"unknown column '{column.value}' in PRIMARY KEY",
                column.span,
                help=did_you_mean(column.value, declared),
            )
            return False
    return True


def _versioned_by_key(node: ast.CreateSource) -> list[ast.Option]:
    """Flink's versioned table, a table with a PRIMARY KEY and a WATERMARK: its ``key`` and
    ``version_time`` options (the watermark's column), located at the constraints; none for
    any other table (its WATERMARK is E0261)."""
    key = node.primary_key
    if not node.bounded or key is None or len(node.watermarks) != 1:
        return []
    mark = node.watermarks[0]
    names = ", ".join(c.value for c in key.columns)
    return [
        _option("key", _quoted(names), key.span),
        _option("version_time", _quoted(mark.column.value), mark.span),
    ]


def _quoted(text: str) -> str:
    """``text`` as a single-quoted string literal."""
    return "'" + text.replace("'", "''") + "'"


#: A table's options that declare its versions (Flink's PRIMARY KEY and event time of a
#: versioned table): read by flowc, never handed to Spark's reader.
_VERSION_OPTIONS = ("key", "version_time")


def _versions(
    ctx: Context, node: ast.CreateSource, schema: Schema | None, options: list[ast.Option]
) -> tuple[tuple[str, ...], str | None]:
    """A table's ``key`` columns and ``version_time`` column (E0266), both or neither;
    neither after an error (the table stays declared: its uses say no more)."""
    if not options:
        return (), None
    given = {o.key: o for o in options}
    for key, other in (("key", "version_time"), ("version_time", "key")):
        if key in given and other not in given:
            ctx.reporter.error(
                Code.E0266,
                f"table '{node.name.value}' gives '{key}' without '{other}'",
                given[key].key_span,
                help="a versioned table declares both: key = 'k' (the columns each version "
                "is of) and version_time = 't' (the TIMESTAMP column from which it is valid)",
            )
            return (), None
    if len(given) < len(options):
        repeated = next(o for o in options if given[o.key] is not o)
        ctx.reporter.error(
            Code.E0266,
            f"option '{repeated.key}' is given twice",
            repeated.key_span,
            help=f"first given at {given[repeated.key].key_span}",
        )
        return (), None
    types = {c.name: c.type for c in schema or ()}
    words: dict[str, list[str]] = {}
    for option in options:
        value = option.value.python
        names = [n.strip() for n in value.split(",")] if isinstance(value, str) else []
        if option.value.kind != LiteralKind.STRING or not all(names):
            ctx.reporter.error(
                Code.E0266,
                f"option '{option.key}' takes column names in a string",
                option.value.span,
                help=f"write {option.key} = 'column'"
                + (" (several: 'a, b')" if option.key == "key" else ""),
            )
            return (), None
        if schema is not None:
            for column in names:
                if column not in types:
                    ctx.reporter.error(
                        Code.E0266,
                        f"option '{option.key}': table '{node.name.value}' has no column "
                        f"'{column}'",
                        option.value.span,
                        help=did_you_mean(column, types) or f"columns: {', '.join(types)}",
                    )
                    return (), None
        words[option.key] = names
    columns = tuple(words["key"])
    time, *more = words["version_time"]
    twice = next((k for k in columns if columns.count(k) > 1), None)
    problem: tuple[str, str] | None = None
    if twice is not None:
        problem = ("key", f"column '{twice}' is given twice")
    elif more:
        problem = ("version_time", "names more than one column")
    elif time in columns:
        problem = ("version_time", f"'{time}' is also a key column")
    elif schema is not None and types[time] != TIMESTAMP:
        problem = ("version_time", f"'{time}' is {types[time]}, not TIMESTAMP")
    if problem is not None:
        which, why = problem
        ctx.reporter.error(
            Code.E0266,
            f"option '{which}': {why}",
            given[which].value.span,
            help="key = 'k' names the columns each version is of, version_time = 't' the "
            "one TIMESTAMP column, apart from them, from which it is valid",
        )
        return (), None
    return columns, time


def _proctime(
    ctx: Context, node: ast.CreateSource, schema: Schema | None
) -> tuple[str | None, tuple[Computed, ...], bool]:
    """The source's processing-time column (``pt AS PROCTIME()``), its other computed
    columns, and False on errors: E0290 for a second PROCTIME() or one on a table, and for
    a computed column that is not an expression of the row's read columns; E0291 for a
    WATERMARK on the processing time."""
    name: str | None = None
    computed: list[Computed] = []
    ok = True
    declared = {c.name for c in schema or ()}
    last_read = max(((c.span.line, c.span.column) for c in node.columns), default=(0, 0))
    for item in node.computed:
        column = item.name.value
        tree = item.expr.tree
        is_proctime = is_proctime_call(tree)
        if column in declared or column == name or any(c.name == column for c in computed):
            ctx.reporter.error(
                Code.E0203,
                f"column '{column}' is declared twice",
                item.name.span,
                help="give the computed column a name of its own",
            )
            ok = False
        elif not is_proctime:
            found = _computed(ctx, node, item, schema, last_read)
            if found is None:
                ok = False
            else:
                computed.append(found)
        elif isinstance(tree, exp.Anonymous) and tree.expressions:
            ctx.reporter.error(
                Code.E0290,
                "PROCTIME() takes no arguments",
                item.expr.span,
                help=f"write {column} AS PROCTIME()",
            )
            ok = False
        elif node.bounded:
            ctx.reporter.error(
                Code.E0290,
                f"table '{node.name.value}' has no processing time: it is read whole",
                item.span,
                help="declare PROCTIME() on the stream that is joined with the table",
            )
            ok = False
        elif name is not None:
            ctx.reporter.error(
                Code.E0290,
                "a source has at most one PROCTIME() column",
                item.span,
                help=f"'{name}' is its processing time already",
            )
            ok = False
        else:
            name = column
    for watermark in node.watermarks:
        if name is not None and watermark.column.value == name:
            ctx.reporter.error(
                Code.E0291,
                f"'{name}' is processing time: it has no watermark",
                watermark.span,
                help="a WATERMARK is for event time, a TIMESTAMP column of the data; "
                "windows over processing time need none (as in Flink)",
            )
            ok = False
    return name, tuple(computed), ok


def _computed(
    ctx: Context,
    node: ast.CreateSource,
    item: ast.ComputedColumn,
    schema: Schema | None,
    last_read: tuple[int, int],
) -> Computed | None:
    """A computed column other than PROCTIME(): an expression of the row's read columns (as
    in Flink, not of other computed columns), typed over them; None after E0290 or a type
    error."""
    where = f"computed column '{item.name.value}'"
    problem = None
    if is_aggregate(item.expr.tree) or item.expr.tree.find(exp.Window) is not None:
        problem = "an aggregate or a window function is not a row's own value"
    elif (item.span.line, item.span.column) < last_read:
        problem = "flowc's stream has computed columns after the read ones"
    elif any(o.key == "on_error" and o.value.python == "route" for o in node.options):
        problem = "a source with on_error = 'route' takes only PROCTIME()"
    if problem is not None:
        ctx.reporter.error(
            Code.E0290,
            f"{where}: {problem}",
            item.span,
            help="declare computed columns after the read columns, as expressions of one row",
        )
        return None
    if schema is None:
        return None
    type_text = ctx.checks.type(item.expr, Scope(schema), ctx.reporter)
    if type_text is None:
        return None
    return Computed(name=item.name.value, expr=item.expr, type=type_text)


#: A files source's options that only mean something for a stream.
_STREAM_ONLY_OPTIONS = ("max_files_per_trigger", "latest_first")


def _table_reads_files(ctx: Context, node: ast.CreateSource) -> bool:
    """E0260 for a ``CREATE TABLE`` over another connector than ``files`` (Flink's habit of
    declaring every stream as a table), before its options are checked for that connector."""
    written = next((o for o in node.options if o.key == "connector"), None)
    name = str(written.value.python).lower() if written is not None else None
    if name is None or name == "files":
        return True
    connector = catalog.CONNECTORS.get(name)
    roles = tuple(r for r in ("source", "sink") if connector is None or r in connector.roles)
    ctx.reporter.error(
        Code.E0260,
        f"table '{node.name.value}' uses connector '{name}', which is not bounded",
        node.span,
        help=habits.table_help(roles),
    )
    return False


def _check_table(
    ctx: Context,
    node: ast.CreateSource,
    connector: catalog.Connector | None,
    options: dict[str, tuple[object, ast.Option]],
    versioned: bool,
) -> bool:
    """A ``CREATE TABLE`` (over ``files``) has no watermark (but the event time of a
    versioned table's, :func:`_versioned_by_key`) and no stream options."""
    ok = True
    for watermark in () if versioned else node.watermarks:
        ctx.reporter.error(
            Code.E0261,
            f"table '{node.name.value}' is bounded: it has no event time and no watermark",
            watermark.span,
            help="remove the WATERMARK; a stream joined with the table keeps its own",
        )
        ok = False
    for key in (*_STREAM_ONLY_OPTIONS, "on_error"):
        if key not in options:
            continue
        value, option = options[key]
        if key == "on_error" and value == "fail":
            continue
        ctx.reporter.error(
            Code.E0262,
            f"option '{key}' applies to streams, not to a table",
            option.key_span,
            help="a table is read whole, and a malformed record in it fails the query",
        )
        ok = False
    return ok


def check_sink(ctx: Context, node: ast.CreateSink) -> None:
    """Columns (optional for a sink), connector and options, and the output mode."""
    name = node.name.value
    ctx.defined.add(name)
    schema = _columns(ctx, node.columns, None) if node.columns is not None else None
    written = _primary_key_options(ctx, node)
    if written is None:
        return
    connector, options, hints = _connector_options(ctx, "sink", node.name, written, node.span)
    if connector is None or ctx.definitions[name].node is not node:
        return
    if node.columns is not None and schema is None:
        return
    mode_value, mode_option = options.pop("mode", ("append", None))
    mode = str(mode_value)
    if mode not in connector.sink_modes:
        # the option as given: in WITH (...), or a --set on the command line
        ctx.reporter.error(
            Code.E0410,
            f"the {connector.name} sink does not support mode '{mode}'",
            mode_option.value.span if mode_option is not None else node.name.span,
            help=f"{connector.name} sinks support {one_of(connector.sink_modes)}",
        )
        return
    if not _check_upsert_sink(ctx, node, connector.name, mode, mode_option, options):
        return
    written_format = options.get("format", (None, None))
    if written_format[0] in catalog.CHANGELOG_FORMATS and written_format[1] is not None:
        ctx.reporter.error(
            Code.E0299,
            f"sink '{name}' cannot write format '{written_format[0]}'",
            written_format[1].value.span,
            help="flowc reads debezium-json; write json (or a sink of updates: 'Upsert sinks')",
        )
        return
    ctx.sinks[name] = SinkDef(
        name=name,
        schema=schema,
        connector=connector.name,
        mode=mode,
        not_null=_sink_not_null(node),
        options=tuple(sorted((k, v) for k, (v, _) in options.items())),
        hints=hints,
        span=node.span,
        written_options={k: o for k, (_, o) in options.items()},
        written_types={c.name.value: c.type for c in node.columns or ()},
        shows_result=node.shows_result,
        mode_by_query=node.flink_table
        and mode_option is None
        and connector.name in catalog.MODE_BY_QUERY_CONNECTORS,
    )


def _sink_not_null(node: ast.CreateSink) -> tuple[str, ...]:
    """The sink's columns a NULL must not reach: those declared NOT NULL, and its PRIMARY
    KEY's, which Flink makes NOT NULL (its sink NOT NULL enforcer fails the job on a NULL
    key: asked of Flink 2.3)."""
    declared = [c.name.value for c in node.columns or () if c.not_null is not None]
    key = [c.value for c in node.primary_key.columns] if node.primary_key is not None else []
    return tuple(dict.fromkeys([*declared, *key]))


def _primary_key_options(ctx: Context, node: ast.CreateSink) -> tuple[ast.Option, ...] | None:
    """A sink's options with its PRIMARY KEY as the upsert ``key`` (and a files sink's
    ``mode = 'update'`` unless written), as Flink upserts into a table with a primary key;
    None after E0293: a connector that cannot upsert, an unknown column, or a ``key`` that
    names other columns."""
    key = node.primary_key
    if key is None:
        return node.options
    written = {o.key: o for o in node.options}
    names = [c.value for c in key.columns]
    declared = {c.name.value for c in node.columns or ()}
    for column in key.columns:
        if node.columns is not None and column.value not in declared:
            ctx.reporter.error(
                Code.E0293,
                f"unknown column '{column.value}' in PRIMARY KEY",
                column.span,
                help=did_you_mean(column.value, declared),
            )
            return None
    connector = str(written["connector"].value.python).lower() if "connector" in written else ""
    mode = str(written["mode"].value.python) if "mode" in written else None
    if connector not in ("postgres", "files") or (connector == "files" and mode == "append"):
        ctx.reporter.error(
            Code.E0293,
            f"sink '{node.name.value}' appends rows: it cannot keep one row per PRIMARY KEY",
            key.span,
            help="a PRIMARY KEY is an upsert sink's key: write to a postgres sink, or a files "
            "sink in mode = 'update'; or remove it to append every row",
        )
        return None
    extra: list[ast.Option] = []
    if "key" in written:
        value = written["key"].value.python
        given = [n.strip() for n in value.split(",")] if isinstance(value, str) else []
        if given != names:
            ctx.reporter.error(
                Code.E0293,
                f"PRIMARY KEY ({', '.join(names)}) and key = {written['key'].value.text} "
                "name different columns",
                key.span,
                help=f"give the upsert key once: remove key (at {written['key'].span}) or "
                "the PRIMARY KEY",
            )
            return None
    else:
        extra.append(_option("key", _quoted(", ".join(names)), key.span))
    if connector == "files" and mode is None:
        extra.append(_option("mode", "'update'", key.span))
    return (*node.options, *extra)


def _option(key: str, text: str, span: Span) -> ast.Option:
    """An option flowc writes for a constraint, located at the constraint."""
    value = ast.Value(kind=LiteralKind.STRING, text=text, span=span)
    return ast.Option(key=key, key_span=span, value=value, span=span)


def _check_upsert_sink(
    ctx: Context,
    node: ast.CreateSink,
    connector: str,
    mode: str,
    mode_option: ast.Option | None,
    options: dict[str, tuple[object, ast.Option]],
) -> bool:
    """An upsert sink (postgres; files in update mode) keeps one row per ``key``: E0430
    without a key, E0433 for what it cannot do (in batch mode it
    upserts the whole result once), E0957 in an untrusted program."""
    name = node.name.value
    if connector == "postgres" and not ctx.policy.trusted:
        ctx.reporter.error(
            Code.E0957,
            f"sink '{name}' connects to a PostgreSQL server: not allowed in an untrusted program",
            node.name.span,
            help="an untrusted program writes files under its base directory only",
        )
        return False
    if not catalog.is_upsert(connector, mode):
        if "key" in options:
            ctx.reporter.error(
                Code.E0430,
                f"sink '{name}' appends rows, so it has no key",
                options["key"][1].key_span,
                help="key = '...' is for an upsert sink: a files sink in mode = 'update', or "
                "a postgres sink",
            )
            return False
        return True
    ok = True
    if "key" not in options:
        if not any(o.key == "key" for o in node.options):  # else its value was refused
            ctx.reporter.error(
                Code.E0430,
                f"sink '{name}' keeps one row per key, and has no key",
                mode_option.value.span if mode_option is not None else node.name.span,
                help="name the columns that identify a row of the results: key = 'auction', "
                "or key = 'auction, window_start'",
            )
        ok = False
    if connector == "files":
        fmt = str(options["format"][0]) if "format" in options else None
        if fmt is not None and fmt not in catalog.UPSERT_FILE_FORMATS:
            ctx.reporter.error(
                Code.E0433,
                f"a files sink in update mode cannot write format '{fmt}'",
                options["format"][1].value.span,
                help=f"an upsert table is rewritten per micro-batch from what it holds: use "
                f"{one_of(catalog.UPSERT_FILE_FORMATS)}",
            )
            ok = False
        if "partition_by" in options:
            ctx.reporter.error(
                Code.E0433,
                "a files sink in update mode cannot be partitioned",
                options["partition_by"][1].key_span,
                help="remove partition_by, or write append-only results",
            )
            ok = False
    return ok


def _connector_options(
    ctx: Context, role: str, name: ast.Name, options: Sequence[ast.Option], span: Span
) -> tuple[catalog.Connector | None, dict[str, tuple[object, ast.Option]], Hints]:
    """Split a source's or sink's WITH (...) into connector, its options, and hints."""
    options = _overridden(ctx, name, options)
    hint_options = [o for o in options if o.key in catalog.HINTS]
    hints = read_hints(hint_options, ctx.reporter)
    by_key: dict[str, ast.Option] = {}
    for option in options:
        if option.key in catalog.HINTS:
            continue
        if option.key in by_key:
            ctx.reporter.error(
                Code.E0403,
                f"option '{option.key}' is given twice",
                option.key_span,
                help=f"first given at {by_key[option.key].key_span}",
            )
            continue
        by_key[option.key] = option
    connector_option = by_key.pop("connector", None)
    if connector_option is None:
        ctx.reporter.error(
            Code.E0401,
            f"{role} '{name.value}' has no connector",
            name.span,
            help=f"add WITH (connector = '...'); connectors: {one_of(_role_connectors(role))}",
        )
        return None, {}, hints
    connector_name = str(connector_option.value.python)
    connector = catalog.CONNECTORS.get(connector_name)
    if connector_option.value.kind != LiteralKind.STRING:
        ctx.reporter.error(
            Code.E0402,
            "the connector name must be a quoted string",
            connector_option.value.span,
            help=f"write connector = '{connector_name}'",
        )
        return None, {}, hints
    if connector is None:
        ctx.reporter.error(
            Code.E0402,
            f"unknown connector '{connector_name}'",
            connector_option.value.span,
            help=did_you_mean(connector_name, catalog.CONNECTORS)
            or f"{role} connectors: {one_of(_role_connectors(role))}",
        )
        return None, {}, hints
    if role not in connector.roles:
        ctx.reporter.error(
            Code.E0404,
            f"connector '{connector_name}' cannot be used as a {role}",
            connector_option.value.span,
            help=f"{role} connectors: {one_of(_role_connectors(role))}",
        )
        return None, {}, hints
    accepted: dict[str, tuple[object, ast.Option]] = {}
    extra = catalog.SINK_OPTIONS if role == "sink" else {}
    for key, option in by_key.items():
        kind = connector.options.get(key) or extra.get(key)
        if role == "sink" and key in catalog.SOURCE_ONLY_OPTIONS:
            ctx.reporter.error(
                Code.E0403,
                f"option '{key}' applies to sources, not sinks",
                option.key_span,
                help=f"remove {key} = ... from the sink's WITH (...) list",
            )
            continue
        if role == "source" and key in catalog.SINK_ONLY_OPTIONS:
            ctx.reporter.error(
                Code.E0403,
                f"option '{key}' applies to sinks, not sources",
                option.key_span,
                help=f"remove {key} = ... from the source's WITH (...) list",
            )
            continue
        if kind is None and not connector.accepts(key):
            known = sorted([*connector.options, *extra, *catalog.HINTS])
            ctx.reporter.error(
                Code.E0403,
                f"unknown option '{key}' for connector '{connector_name}'",
                option.key_span,
                help=did_you_mean(key, known) or "known options: " + ", ".join(known),
            )
            continue
        if kind is None:
            accepted[key] = (option.value.python, option)
            continue
        try:
            accepted[key] = (kind.parse(option.value), option)
        except catalog.OptionValueError as error:
            ctx.reporter.error(
                Code.E0405,
                f"invalid value for option '{key}': {error}",
                option.value.span,
                help=f"'{key}' takes {kind.description}",
            )
    for required in connector.required.get(role, ()):
        if required not in by_key:
            ctx.reporter.error(
                Code.E0406,
                f"connector '{connector_name}' needs the option '{required}'",
                span,
                help=f"add {required} = ... to the WITH (...) list",
            )
    return connector, accepted, hints


def _overridden(ctx: Context, name: ast.Name, options: Sequence[ast.Option]) -> list[ast.Option]:
    """The WITH (...) list with ``--set name.option=value`` applied (checked as written)."""
    result = list(options)
    prefix = name.value + "."
    for override in ctx.overrides:
        if override.is_setting or not override.key.startswith(prefix):
            continue
        ctx.applied_overrides.add(override.key)
        key = override.key[len(prefix) :]
        result = [o for o in result if o.key != key]
        result.append(override.option(key))
    return result


def _role_connectors(role: str) -> list[str]:
    return [c.name for c in catalog.CONNECTORS.values() if role in c.roles]


# ------------------------------------------------------------ sources and sinks


def _columns(
    ctx: Context, columns: Iterable[ast.ColumnDef], qualifier: str | None
) -> Schema | None:
    schema: list[Column] = []
    seen: dict[str, Span] = {}
    ok = True
    for column in columns:
        name = column.name.value
        if name in seen:
            ctx.reporter.error(
                Code.E0203,
                f"column '{name}' is declared twice",
                column.name.span,
                help=f"first declared at {seen[name]}",
            )
            ok = False
            continue
        seen[name] = column.name.span
        try:
            type_text = normalize_type(column.type.text)
        except TypeSyntaxError:
            ctx.reporter.error(
                Code.E0204,
                f"unknown type '{column.type.text}'",
                column.type.span,
                help="use a Spark SQL type: STRING, INT, BIGINT, DOUBLE, BOOLEAN, "
                "TIMESTAMP, DATE, DECIMAL(p, s), ARRAY<T>, MAP<K, V>, STRUCT<...>",
            )
            ok = False
            continue
        schema.append(Column(name, type_text, qualifier))
    return tuple(schema) if ok else None


def _check_source_columns(
    ctx: Context,
    node: ast.CreateSource,
    connector: str,
    schema: Schema,
    options: dict[str, tuple[object, ast.Option]],
) -> None:
    """A connector that cannot produce the declared columns is a compile error."""
    columns = {c.name.value: c for c in node.columns}

    def bad(column: Column, why: str, help: str) -> None:
        ctx.reporter.error(Code.E0408, why, columns[column.name].span, help=help)

    if connector == "rate":
        for column in schema:
            allowed = catalog.RATE_COLUMNS.get(column.name)
            if allowed is None or column.type not in allowed:
                bad(
                    column,
                    f"the rate connector cannot produce column '{column.name} {column.type}'",
                    "it produces timestamp TIMESTAMP and value BIGINT",
                )
    elif connector == "kafka" and options.get("format", ("raw", None))[0] == "raw":
        for column in schema:
            allowed = catalog.KAFKA_COLUMNS.get(column.name)
            if allowed is None or column.type not in allowed:
                bad(
                    column,
                    f"the kafka connector cannot produce column '{column.name} {column.type}'",
                    "Kafka records have key, value (BINARY or STRING), topic, partition, "
                    "offset, timestamp and timestamp_type; or set format = 'json' to read "
                    "the columns from the value",
                )
    if connector == "files" and "on_error" in options:
        ctx.on_error_spans[node.name.value] = options["on_error"][1].value.span
        fmt = options.get("format", (None, None))[0]
        if fmt is not None and fmt not in catalog.PARSED_FILE_FORMATS:
            ctx.reporter.error(
                Code.E0403,
                f"option 'on_error' does not apply to {fmt} files",
                options["on_error"][1].key_span,
                help="on_error applies to json and csv sources, whose records can be "
                "malformed; remove it",
            )
    if connector == "files":
        _check_debezium(ctx, node, options)
    if connector == "files" and options.get("format", (None, None))[0] == "text":
        if len(schema) != 1 or schema[0].type != "STRING":
            ctx.reporter.error(
                Code.E0408,
                "a text file source produces exactly one STRING column (the line)",
                node.name.span,
                help="declare one column, e.g. (line STRING)",
            )
    elif connector == "socket":
        with_ts = options.get("include_timestamp", (False, None))[0]
        strings = [c for c in schema if c.type == "STRING"]
        others = [c for c in schema if c.type != "STRING"]
        ok_ts = all(c.name == "timestamp" and c.type == TIMESTAMP for c in others)
        if len(strings) != 1 or not ok_ts or (others and not with_ts):
            ctx.reporter.error(
                Code.E0408,
                "a socket source produces one STRING column (the line), and a "
                "timestamp TIMESTAMP column with include_timestamp = true",
                node.name.span,
            )
    elif connector == "datagen":
        _check_datagen(ctx, node, schema, options)


#: Format options a debezium-json source refuses: its envelopes are JSON lines, read as
#: text and parsed one by one (CSV's options, a whole-file JSON, an encoding but UTF-8,
#: or a compression setting would be silently ignored).
_NOT_DEBEZIUM_OPTIONS = (
    "header",
    "delimiter",
    "quote",
    "escape",
    "encoding",
    "multiline",
    "compression",
    "null_value",
    "comment",
)


def _check_debezium(
    ctx: Context, node: ast.CreateSource, options: dict[str, tuple[object, ast.Option]]
) -> None:
    """E0299: what a debezium-json source cannot be read as Flink reads it."""
    fmt = options.get("format", (None, None))[0]
    debezium = fmt in catalog.CHANGELOG_FORMATS
    for key, (value, option) in options.items():
        if key.startswith("debezium-json.") and not debezium:
            ctx.reporter.error(
                Code.E0299,
                f"option '{key}' applies to format 'debezium-json', not '{fmt}'",
                option.key_span,
                help=f"remove {key} = ..., or read the files with format = 'debezium-json'",
            )
        elif debezium and key == catalog.DEBEZIUM_IGNORE_PARSE_ERRORS and value is True:
            ctx.reporter.error(
                Code.E0299,
                "flowc does not drop malformed records silently, as Flink's "
                "'debezium-json.ignore-parse-errors' = 'true' does",
                option.value.span,
                help="remove it to fail on the first malformed envelope, or write "
                "on_error = 'route' to send them to FROM "
                f"{node.name.value}.{catalog.ERRORS_OUTPUT}",
            )
        elif debezium and key in _NOT_DEBEZIUM_OPTIONS:
            ctx.reporter.error(
                Code.E0299,
                f"option '{key}' does not apply to format 'debezium-json'",
                option.key_span,
                help="a debezium-json file holds one JSON envelope per line (UTF-8); "
                f"remove {key} = ...",
            )
    if not debezium:
        return
    format_option = options["format"][1]
    if node.bounded:
        ctx.reporter.error(
            Code.E0299,
            f"table '{node.name.value}' cannot read changes (format 'debezium-json')",
            format_option.value.span,
            help="read the changes as a stream: CREATE SOURCE (or, in the Flink dialect, "
            "a table the job neither writes nor joins FOR SYSTEM_TIME AS OF)",
        )
    for column in node.columns:
        if column.name.value == catalog.OP_COLUMN:
            ctx.reporter.error(
                Code.E0299,
                f"column '{catalog.OP_COLUMN}' is the hidden column of each change's kind",
                column.name.span,
                help="rename the column",
            )


def _check_datagen(
    ctx: Context,
    node: ast.CreateSource,
    schema: Schema,
    options: dict[str, tuple[object, ast.Option]],
) -> None:
    names = {c.name: c for c in schema}
    spans = {c.name.value: c.span for c in node.columns}
    for column in schema:
        if column.type.startswith(("ARRAY", "MAP", "STRUCT", "BINARY")):
            ctx.reporter.error(
                Code.E0408,
                f"datagen cannot generate column '{column.name} {column.type}'",
                spans[column.name],
                help="datagen generates numbers, strings, booleans, decimals, dates and timestamps",
            )
    for key, (_value, option) in options.items():
        if not key.startswith("fields."):
            continue
        parts = key.split(".")
        if len(parts) != 3 or parts[1] not in names:
            ctx.reporter.error(
                Code.E0403,
                f"'{key}' does not name a column of this source",
                option.key_span,
                help=did_you_mean(parts[1] if len(parts) > 1 else key, names)
                or "use fields.<column>.min|max|length|kind",
            )
            continue
        kind = catalog.DATAGEN_FIELD_OPTIONS.get(parts[2])
        if kind is None:
            ctx.reporter.error(
                Code.E0403,
                f"unknown datagen field option '{parts[2]}'",
                option.key_span,
                help=did_you_mean(parts[2], catalog.DATAGEN_FIELD_OPTIONS)
                or "field options: " + ", ".join(catalog.DATAGEN_FIELD_OPTIONS),
            )
            continue
        try:
            kind.parse(option.value)
        except catalog.OptionValueError as error:
            ctx.reporter.error(
                Code.E0405, f"invalid value for option '{key}': {error}", option.value.span
            )


def _watermark(ctx: Context, node: ast.CreateSource, schema: Schema) -> Watermark | None:
    if not node.watermarks:
        return None
    for extra in node.watermarks[1:]:
        ctx.reporter.error(
            Code.E0409,
            "a source has at most one WATERMARK",
            extra.span,
            help=f"the first is at {node.watermarks[0].span}",
        )
    definition = node.watermarks[0]
    column = definition.column.value
    declared = {c.name: c for c in schema}
    if column not in declared:
        ctx.reporter.error(
            Code.E0201,
            f"unknown column '{column}' in WATERMARK",
            definition.column.span,
            help=did_you_mean(column, declared),
        )
        return None
    if declared[column].type != TIMESTAMP:
        ctx.reporter.error(
            Code.E0205,
            f"WATERMARK column '{column}' is {declared[column].type}, not TIMESTAMP",
            definition.column.span,
            help="event time must be a TIMESTAMP column; CAST it in the source's producer",
        )
        return None
    expr_type = ctx.checks.type(definition.expr, Scope(schema), ctx.reporter)
    if expr_type is None:
        return None
    if expr_type not in (TIMESTAMP, UNKNOWN):
        ctx.reporter.error(
            Code.E0205,
            f"WATERMARK expression is {expr_type}, not TIMESTAMP",
            definition.expr.span,
            help=f"for example: WATERMARK FOR {column} AS {column} - INTERVAL 5 SECONDS",
        )
        return None
    return Watermark(column=column, expr=definition.expr, span=definition.span)
