"""Semantic analysis: AST → checked :class:`~flowc.program.Program`.

Resolves names (sources, views, sinks, side outputs; use before definition,
duplicates, cycles), reads settings, hints and connector options, and carries a typed
schema through every step. Problems go to the reporter and analysis goes on, so one
run reports every error in the file; a statement with errors is left out of the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

from sqlglot import exp

from flowc import ast, catalog, trust
from flowc.diagnostics import Reporter, did_you_mean, one_of
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.functions import SparkExpressionChecks, has_aggregate, inside_aggregate, is_aggregate
from flowc.habits import check_source_path
from flowc.lower_sql import check_flink_windows, lower_sql_query
from flowc.program import (
    ERRORS_SCHEMA,
    Column,
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    Hints,
    InsertDef,
    Origin,
    Program,
    Schema,
    Settings,
    SideOutput,
    SinkDef,
    SourceDef,
    Step,
    Stream,
    ViewDef,
    Watermark,
)
from flowc.spans import Span
from flowc.sqltypes import (
    BOOLEAN,
    TIMESTAMP,
    UNKNOWN,
    Scope,
    TypeSyntaxError,
    node_span,
    normalize_type,
    types_match,
)

STATEFUL_KINDS = frozenset({"aggregate", "window_aggregate", "deduplicate", "join"})
PARTITION_KINDS = frozenset({"key_by", "partition", "partition_by"})


def analyze(
    tree: ast.Program,
    reporter: Reporter,
    overrides: Mapping[str, str] | None = None,
    policy: trust.TrustPolicy | None = None,
) -> Program:
    """``overrides`` are ``flowc run --set KEY=VALUE``: a setting, applied as if set by
    ``SET``, or ``source_or_sink.option``; ``policy`` is how far the program is trusted
    (:mod:`flowc.trust`)."""
    start = len(reporter.diagnostics)
    policy = policy or trust.TrustPolicy()
    program = _Analyzer(tree, reporter, overrides or {}, policy).run()
    trust.label_command_line(reporter, start, overrides or {})
    return program


@dataclass(slots=True)
class _Definition:
    kind: str  # source, sink or view
    node: ast.CreateSource | ast.CreateSink | ast.CreateView
    order: int


class _Analyzer:
    def __init__(
        self,
        tree: ast.Program,
        reporter: Reporter,
        overrides: Mapping[str, str],
        policy: trust.TrustPolicy,
    ) -> None:
        self.tree = tree
        self.reporter = reporter
        self.given_overrides = overrides
        self.overrides: list[trust.Override] = []
        self.policy = policy
        self.applied_overrides: set[str] = set()
        self.file = tree.file
        self.definitions: dict[str, _Definition] = {}
        self.defined: set[str] = set()
        self.sources: dict[str, SourceDef] = {}
        self.sinks: dict[str, SinkDef] = {}
        self.views: dict[str, ViewDef] = {}
        self.inserts: list[InsertDef] = []
        self.used: set[str] = set()
        self.read_errors: set[str] = set()  # sources whose side output 'errors' is read
        self.on_error_spans: dict[str, Span] = {}
        self.settings = Settings()
        self.checks = SparkExpressionChecks()  # typing, then Spark's function and literal checks

    # ------------------------------------------------------------ driver

    def run(self) -> Program:
        self.overrides = trust.read_overrides(self.given_overrides, self.reporter)
        if not trust.check_program(self.tree, self.overrides, self.policy, self.reporter):
            # A query inside an expression: its columns would only add follow-on errors.
            return Program(
                file=self.file,
                settings=self.settings,
                sources=(),
                sinks=(),
                views=(),
                inserts=(),
                span=self.tree.span,
            )
        self.settings = self._settings()
        self.checks = SparkExpressionChecks.for_settings(self.settings)
        self._declare()
        for order, statement in enumerate(self.tree.statements):
            if isinstance(statement, ast.CreateSource):
                self._source(statement, order)
            elif isinstance(statement, ast.CreateSink):
                self._sink(statement, order)
            elif isinstance(statement, ast.CreateView):
                self._view(statement, order)
            elif isinstance(statement, ast.Insert):
                self._insert(statement, order)
        program = Program(
            file=self.file,
            settings=self.settings,
            sources=tuple(self.sources.values()),
            sinks=tuple(self.sinks.values()),
            views=tuple(self.views.values()),
            inserts=tuple(self.inserts),
            span=self.tree.span,
        )
        self._check_program(program)
        for override in self.overrides:
            if override.is_setting or override.key in self.applied_overrides:
                continue
            self.reporter.error(
                "E0411",
                f"there is no source or sink '{override.key.split('.')[0]}'",
                override.key_span,
                help="write --set <source or sink>.<option>=<value>, or --set <setting>=<value>",
            )
        return program

    def _declare(self) -> None:
        """Record every definition first, so a reference to a later one can be explained."""
        for order, statement in enumerate(self.tree.statements):
            if not isinstance(statement, ast.CreateSource | ast.CreateSink | ast.CreateView):
                continue
            kind = {ast.CreateSource: "source", ast.CreateSink: "sink", ast.CreateView: "view"}[
                type(statement)
            ]
            name = statement.name.value
            previous = self.definitions.get(name)
            if previous is not None:
                self.reporter.error(
                    "E0102",
                    f"'{name}' is already defined",
                    statement.name.span,
                    help=f"the {previous.kind} '{name}' is defined at "
                    f"{previous.node.name.span}; choose another name",
                )
                continue
            self.definitions[name] = _Definition(kind, statement, order)

    # ------------------------------------------------------------ settings

    def _settings(self) -> Settings:
        values: dict[str, object] = {}
        spans: dict[str, Span] = {}
        spark: dict[str, str] = {}
        options = [s.option for s in self.tree.statements if isinstance(s, ast.SetStmt)]
        options += [o.option() for o in self.overrides if o.is_setting]  # --set: the last word
        for option in options:
            key = option.key
            if key in spans and option.span.file != trust.COMMAND_LINE:
                self.reporter.warning(
                    "W0003",
                    f"'{key}' is set again; the earlier value is overridden",
                    option.key_span,
                    help=f"first set at {spans[key]}",
                )
            if key.startswith(catalog.SETTING_PREFIXES):
                spark[key] = str(option.value.python)
                spans[key] = option.span
                continue
            kind = catalog.SETTINGS.get(key)
            if kind is None:
                self.reporter.error(
                    "E0301",
                    f"unknown setting '{key}'",
                    option.key_span,
                    help=did_you_mean(key, catalog.SETTINGS)
                    or "settings: " + ", ".join(sorted(catalog.SETTINGS)) + ", spark.*",
                )
                continue
            try:
                values[key] = kind.parse(option.value)
            except catalog.ValueError_ as error:
                self.reporter.error(
                    "E0302",
                    f"invalid value for setting '{key}': {error}",
                    option.value.span,
                    help=f"'{key}' takes {kind.description}",
                )
                continue
            if key == "job.name" and (unprintable := _unprintable(str(values[key]))):
                del values[key]
                self.reporter.error(
                    "E0413",
                    f"job.name contains the control character {unprintable}",
                    option.value.span,
                    help="a job name becomes a folder name, a Python docstring and log lines: "
                    "use printable characters",
                )
                continue
            spans[key] = option.span
        settings = Settings(
            parallelism=int(values.get("parallelism", 1)),  # type: ignore[call-overload]
            max_parallelism=values.get("max_parallelism"),  # type: ignore[arg-type]
            chaining=bool(values.get("chaining", True)),
            execution_mode=str(values.get("execution.mode", "streaming")),
            checkpoint_interval_ms=values.get("checkpoint.interval"),  # type: ignore[arg-type]
            checkpoint_mode=str(values.get("checkpoint.mode", "exactly_once")),
            checkpoint_dir=values.get("checkpoint.dir"),  # type: ignore[arg-type]
            job_name=str(values.get("job.name", PurePath(self.file).stem or "job")),
            sql_dialect=str(values.get("sql.dialect", "spark")),
            spark_conf=tuple(sorted(spark.items())),
            spans=spans,
        )
        interval = settings.checkpoint_interval_ms
        if interval is not None and interval < 10:
            self.reporter.error(
                "E0302",
                f"checkpoint interval {interval} ms is below Flink's minimum of 10 ms",
                spans["checkpoint.interval"],
                help="use 10ms or more",
            )
        if settings.max_parallelism is not None and settings.parallelism > settings.max_parallelism:
            self.reporter.error(
                "E0305",
                f"parallelism {settings.parallelism} is larger than max_parallelism "
                f"{settings.max_parallelism}",
                spans["parallelism"],
                help="Maximum parallelism must not be smaller than parallelism: "
                "raise max_parallelism or lower parallelism",
            )
        return settings

    # ------------------------------------------------------------ hints and options

    def _hints(self, options: Iterable[ast.Option]) -> Hints:
        values: dict[str, object] = {}
        spans: dict[str, Span] = {}
        for option in options:
            kind = catalog.HINTS[option.key]
            if option.key in spans:
                self.reporter.error(
                    "E0303",
                    f"hint '{option.key}' is given twice",
                    option.key_span,
                    help=f"first given at {spans[option.key]}",
                )
                continue
            try:
                values[option.key] = kind.parse(option.value)
            except catalog.ValueError_ as error:
                self.reporter.error(
                    "E0304",
                    f"invalid value for hint '{option.key}': {error}",
                    option.value.span,
                    help=f"'{option.key}' takes {kind.description}",
                )
                continue
            spans[option.key] = option.span
        return Hints(
            name=values.get("name"),  # type: ignore[arg-type]
            uid=values.get("uid"),  # type: ignore[arg-type]
            parallelism=values.get("parallelism"),  # type: ignore[arg-type]
            max_parallelism=values.get("max_parallelism"),  # type: ignore[arg-type]
            slot_sharing_group=values.get("slot_sharing_group"),  # type: ignore[arg-type]
            chaining=str(values.get("chaining", "always")),
            spans=spans,
        )

    def _step_hints(self, step: ast.Step) -> Hints:
        known = []
        for option in step.hints:
            if option.key in catalog.HINTS:
                known.append(option)
            else:
                self.reporter.error(
                    "E0303",
                    f"unknown hint '{option.key}'",
                    option.key_span,
                    help=did_you_mean(option.key, catalog.HINTS)
                    or "hints: " + ", ".join(catalog.HINTS),
                )
        return self._hints(known)

    def _connector_options(
        self, role: str, name: ast.Name, options: Sequence[ast.Option], span: Span
    ) -> tuple[catalog.Connector | None, dict[str, tuple[object, ast.Option]], Hints]:
        """Split a source's or sink's WITH (...) into connector, its options, and hints."""
        options = self._overridden(name, options)
        hint_options = [o for o in options if o.key in catalog.HINTS]
        hints = self._hints(hint_options)
        by_key: dict[str, ast.Option] = {}
        for option in options:
            if option.key in catalog.HINTS:
                continue
            if option.key in by_key:
                self.reporter.error(
                    "E0403",
                    f"option '{option.key}' is given twice",
                    option.key_span,
                    help=f"first given at {by_key[option.key].key_span}",
                )
                continue
            by_key[option.key] = option
        connector_option = by_key.pop("connector", None)
        if connector_option is None:
            self.reporter.error(
                "E0401",
                f"{role} '{name.value}' has no connector",
                name.span,
                help=f"add WITH (connector = '...'); connectors: {one_of(self._connectors(role))}",
            )
            return None, {}, hints
        connector_name = str(connector_option.value.python)
        connector = catalog.CONNECTORS.get(connector_name)
        if connector_option.value.kind != "string":
            self.reporter.error(
                "E0402",
                "the connector name must be a quoted string",
                connector_option.value.span,
                help=f"write connector = '{connector_name}'",
            )
            return None, {}, hints
        if connector is None:
            self.reporter.error(
                "E0402",
                f"unknown connector '{connector_name}'",
                connector_option.value.span,
                help=did_you_mean(connector_name, catalog.CONNECTORS)
                or f"{role} connectors: {one_of(self._connectors(role))}",
            )
            return None, {}, hints
        if role not in connector.roles:
            self.reporter.error(
                "E0404",
                f"connector '{connector_name}' cannot be used as a {role}",
                connector_option.value.span,
                help=f"{role} connectors: {one_of(self._connectors(role))}",
            )
            return None, {}, hints
        accepted: dict[str, tuple[object, ast.Option]] = {}
        extra = catalog.SINK_OPTIONS if role == "sink" else {}
        for key, option in by_key.items():
            kind = connector.options.get(key) or extra.get(key)
            if role == "sink" and key in catalog.SOURCE_ONLY_OPTIONS:
                self.reporter.error(
                    "E0403",
                    f"option '{key}' applies to sources, not sinks",
                    option.key_span,
                    help=f"remove {key} = ... from the sink's WITH (...) list",
                )
                continue
            if kind is None and not connector.accepts(key):
                known = sorted([*connector.options, *extra, *catalog.HINTS])
                self.reporter.error(
                    "E0403",
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
            except catalog.ValueError_ as error:
                self.reporter.error(
                    "E0405",
                    f"invalid value for option '{key}': {error}",
                    option.value.span,
                    help=f"'{key}' takes {kind.description}",
                )
        for required in connector.required.get(role, ()):
            if required not in by_key:
                self.reporter.error(
                    "E0406",
                    f"connector '{connector_name}' needs the option '{required}'",
                    span,
                    help=f"add {required} = ... to the WITH (...) list",
                )
        return connector, accepted, hints

    def _overridden(self, name: ast.Name, options: Sequence[ast.Option]) -> list[ast.Option]:
        """The WITH (...) list with ``--set name.option=value`` applied (checked as written)."""
        result = list(options)
        prefix = name.value + "."
        for override in self.overrides:
            if override.is_setting or not override.key.startswith(prefix):
                continue
            self.applied_overrides.add(override.key)
            key = override.key[len(prefix) :]
            result = [o for o in result if o.key != key]
            result.append(override.option(key))
        return result

    @staticmethod
    def _connectors(role: str) -> list[str]:
        return [c.name for c in catalog.CONNECTORS.values() if role in c.roles]

    # ------------------------------------------------------------ sources and sinks

    def _columns(self, columns: Iterable[ast.ColumnDef], qualifier: str | None) -> Schema | None:
        schema: list[Column] = []
        seen: dict[str, Span] = {}
        ok = True
        for column in columns:
            name = column.name.value
            if name in seen:
                self.reporter.error(
                    "E0203",
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
                self.reporter.error(
                    "E0204",
                    f"unknown type '{column.type.text}'",
                    column.type.span,
                    help="use a Spark SQL type: STRING, INT, BIGINT, DOUBLE, BOOLEAN, "
                    "TIMESTAMP, DATE, DECIMAL(p, s), ARRAY<T>, MAP<K, V>, STRUCT<...>",
                )
                ok = False
                continue
            schema.append(Column(name, type_text, qualifier))
        return tuple(schema) if ok else None

    def _source(self, node: ast.CreateSource, order: int) -> None:
        name = node.name.value
        self.defined.add(name)
        schema = self._columns(node.columns, name)
        connector, options, hints = self._connector_options(
            "source", node.name, node.options, node.span
        )
        if schema is not None and not schema:
            self.reporter.error(
                "E0407",
                f"source '{name}' declares no columns",
                node.name.span,
                help="declare the columns the source produces: CREATE SOURCE s (col TYPE, ...)",
            )
            schema = None
        if schema is not None and connector is not None:
            self._check_source_columns(node, connector.name, schema, options)
        if connector is not None and connector.name == "files" and "path" in options:
            path, path_option = options["path"]
            # Untrusted: never look at a path outside the sandbox (E0953 says why).
            if trust.path_allowed(self.policy, self.file, str(path)):
                check_source_path(self.file, name, path_option, path, self.reporter)
        watermark = self._watermark(node, schema) if schema is not None else None
        if schema is None or connector is None or self.definitions[name].node is not node:
            return
        self.sources[name] = SourceDef(
            name=name,
            schema=schema,
            watermark=watermark,
            connector=connector.name,
            options=tuple(sorted((k, v) for k, (v, _) in options.items())),
            hints=hints,
            span=node.span,
        )

    def _check_source_columns(
        self,
        node: ast.CreateSource,
        connector: str,
        schema: Schema,
        options: dict[str, tuple[object, ast.Option]],
    ) -> None:
        """A connector that cannot produce the declared columns is a compile error."""
        columns = {c.name.value: c for c in node.columns}

        def bad(column: Column, why: str, help: str) -> None:
            self.reporter.error("E0408", why, columns[column.name].span, help=help)

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
            self.on_error_spans[node.name.value] = options["on_error"][1].value.span
            fmt = options.get("format", (None, None))[0]
            if fmt is not None and fmt not in catalog.PARSED_FILE_FORMATS:
                self.reporter.error(
                    "E0403",
                    f"option 'on_error' does not apply to {fmt} files",
                    options["on_error"][1].key_span,
                    help="on_error applies to json and csv sources, whose records can be "
                    "malformed; remove it",
                )
        if connector == "files" and options.get("format", (None, None))[0] == "text":
            if len(schema) != 1 or schema[0].type != "STRING":
                self.reporter.error(
                    "E0408",
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
                self.reporter.error(
                    "E0408",
                    "a socket source produces one STRING column (the line), and a "
                    "timestamp TIMESTAMP column with include_timestamp = true",
                    node.name.span,
                )
        elif connector == "datagen":
            self._check_datagen(node, schema, options)

    def _check_datagen(
        self, node: ast.CreateSource, schema: Schema, options: dict[str, tuple[object, ast.Option]]
    ) -> None:
        names = {c.name: c for c in schema}
        spans = {c.name.value: c.span for c in node.columns}
        for column in schema:
            if column.type.startswith(("ARRAY", "MAP", "STRUCT", "BINARY")):
                self.reporter.error(
                    "E0408",
                    f"datagen cannot generate column '{column.name} {column.type}'",
                    spans[column.name],
                    help="datagen generates numbers, strings, booleans, decimals, dates "
                    "and timestamps",
                )
        for key, (_value, option) in options.items():
            if not key.startswith("fields."):
                continue
            parts = key.split(".")
            if len(parts) != 3 or parts[1] not in names:
                self.reporter.error(
                    "E0403",
                    f"'{key}' does not name a column of this source",
                    option.key_span,
                    help=did_you_mean(parts[1] if len(parts) > 1 else key, names)
                    or "use fields.<column>.min|max|length|kind",
                )
                continue
            kind = catalog.DATAGEN_FIELD_OPTIONS.get(parts[2])
            if kind is None:
                self.reporter.error(
                    "E0403",
                    f"unknown datagen field option '{parts[2]}'",
                    option.key_span,
                    help=did_you_mean(parts[2], catalog.DATAGEN_FIELD_OPTIONS)
                    or "field options: " + ", ".join(catalog.DATAGEN_FIELD_OPTIONS),
                )
                continue
            try:
                kind.parse(option.value)
            except catalog.ValueError_ as error:
                self.reporter.error(
                    "E0405", f"invalid value for option '{key}': {error}", option.value.span
                )

    def _watermark(self, node: ast.CreateSource, schema: Schema) -> Watermark | None:
        if not node.watermarks:
            return None
        for extra in node.watermarks[1:]:
            self.reporter.error(
                "E0409",
                "a source has at most one WATERMARK",
                extra.span,
                help=f"the first is at {node.watermarks[0].span}",
            )
        definition = node.watermarks[0]
        column = definition.column.value
        declared = {c.name: c for c in schema}
        if column not in declared:
            self.reporter.error(
                "E0201",
                f"unknown column '{column}' in WATERMARK",
                definition.column.span,
                help=did_you_mean(column, declared),
            )
            return None
        if declared[column].type != TIMESTAMP:
            self.reporter.error(
                "E0205",
                f"WATERMARK column '{column}' is {declared[column].type}, not TIMESTAMP",
                definition.column.span,
                help="event time must be a TIMESTAMP column; CAST it in the source's producer",
            )
            return None
        expr_type = self.checks.type(definition.expr, Scope(schema), self.reporter)
        if expr_type is None:
            return None
        if expr_type not in (TIMESTAMP, UNKNOWN):
            self.reporter.error(
                "E0205",
                f"WATERMARK expression is {expr_type}, not TIMESTAMP",
                definition.expr.span,
                help=f"for example: WATERMARK FOR {column} AS {column} - INTERVAL 5 SECONDS",
            )
            return None
        return Watermark(column=column, expr=definition.expr, span=definition.span)

    def _sink(self, node: ast.CreateSink, order: int) -> None:
        name = node.name.value
        self.defined.add(name)
        schema = self._columns(node.columns, None) if node.columns is not None else None
        connector, options, hints = self._connector_options(
            "sink", node.name, node.options, node.span
        )
        if connector is None or self.definitions[name].node is not node:
            return
        if node.columns is not None and schema is None:
            return
        mode = str(options.pop("mode", ("append", None))[0])
        if mode not in connector.sink_modes:
            mode_option = next(o for o in node.options if o.key == "mode")
            self.reporter.error(
                "E0410",
                f"the {connector.name} sink does not support mode '{mode}'",
                mode_option.value.span,
                help=f"{connector.name} sinks support {one_of(connector.sink_modes)}"
                + (" (file sinks are append-only)" if connector.name == "files" else ""),
            )
            return
        self.sinks[name] = SinkDef(
            name=name,
            schema=schema,
            connector=connector.name,
            mode=mode,
            options=tuple(sorted((k, v) for k, (v, _) in options.items())),
            hints=hints,
            span=node.span,
        )

    # ------------------------------------------------------------ views and inserts

    def _view(self, node: ast.CreateView, order: int) -> None:
        name = node.name.value
        self.defined.add(name)
        side_outputs: list[SideOutput] = []
        registered = self.definitions[name].node is node
        stream = self._query(node.query, side_outputs, view=name if registered else None)
        if stream is None or not registered:
            return
        self.views[name] = ViewDef(
            name=name, stream=stream, side_outputs=tuple(side_outputs), span=node.span
        )

    def _insert(self, node: ast.Insert, order: int) -> None:
        sink_name = node.sink.value
        definition = self.definitions.get(sink_name)
        side_outputs: list[SideOutput] = []
        stream = self._query(node.query, side_outputs, view=None)
        if definition is None or definition.kind != "sink":
            what = f"a {definition.kind}" if definition else "not defined"
            sinks = [n for n, d in self.definitions.items() if d.kind == "sink"]
            self.reporter.error(
                "E0103",
                f"cannot INSERT INTO '{sink_name}': it is {what}",
                node.sink.span,
                help=did_you_mean(sink_name, sinks)
                or ("sinks: " + ", ".join(sinks) if sinks else "declare it with CREATE SINK"),
            )
            return
        if definition.order > order:
            self.reporter.error(
                "E0104",
                f"sink '{sink_name}' is used before its definition",
                node.sink.span,
                help=f"move CREATE SINK {sink_name} (line {definition.node.span.line}) above this",
            )
            return
        self.used.add(sink_name)
        if stream is None or sink_name not in self.sinks:
            return
        for output in side_outputs:
            self.reporter.warning(
                "W0005",
                f"side output '{output.name}' of a ROUTE in an INSERT can never be read",
                output.span,
                help="define the ROUTE in a CREATE VIEW and read it with FROM view.name",
            )
        self._check_sink_schema(node, self.sinks[sink_name], stream)
        self.inserts.append(InsertDef(sink=sink_name, stream=stream, span=node.span))

    def _check_sink_schema(self, node: ast.Insert, sink: SinkDef, stream: Stream) -> None:
        names: dict[str, Column] = {}
        for column in stream.schema:
            if column.name in names:
                self.reporter.error(
                    "E0206",
                    f"the query writes two columns named '{column.name}'",
                    node.query.span,
                    help="SELECT the columns to write, renaming one of them with AS",
                )
                return
            names[column.name] = column
        if sink.schema is None:
            return
        written = [(c.name, c.type) for c in stream.schema]
        declared = [(c.name, c.type) for c in sink.schema]
        same = len(written) == len(declared) and all(
            w[0] == d[0] and types_match(w[1], d[1]) for w, d in zip(written, declared, strict=True)
        )
        if not same:
            self.reporter.error(
                "E0207",
                f"the query's columns do not match sink '{sink.name}'",
                node.query.span,
                help=f"sink: ({_schema_text(sink.schema)}); query: ({_schema_text(stream.schema)})",
            )

    # ------------------------------------------------------------ relations

    def _reference(self, relation: ast.Relation, view: str | None) -> tuple[Origin, Schema] | None:
        """Resolve ``FROM x`` / ``FROM v.out`` / a JOIN or UNION side to its origin and schema."""
        name = relation.name.value
        definition = self.definitions.get(name)
        if definition is not None:
            self.used.add(name)
        if definition is None:
            candidates = [n for n, d in self.definitions.items() if d.kind != "sink"]
            self.reporter.error(
                "E0101",
                f"unknown source or view '{name}'",
                relation.name.span,
                help=did_you_mean(name, candidates)
                or ("defined: " + ", ".join(candidates) if candidates else None),
            )
            return None
        if definition.kind == "sink":
            self.reporter.error(
                "E0103",
                f"cannot read from '{name}': it is a sink",
                relation.name.span,
                help="read from a source or a view",
            )
            return None
        if name == view:
            self.reporter.error(
                "E0105",
                f"view '{name}' reads from itself",
                relation.name.span,
                help="a view cannot be defined in terms of itself",
            )
            return None
        if name not in self.defined:
            cycle = self._cycle(name, view) if view is not None else None
            if cycle is not None:
                self.reporter.error(
                    "E0105",
                    "views form a cycle: " + " -> ".join(cycle),
                    relation.name.span,
                    help="streams must flow one way; break the cycle",
                )
            else:
                self.reporter.error(
                    "E0104",
                    f"{definition.kind} '{name}' is used before its definition",
                    relation.name.span,
                    help=f"move CREATE {definition.kind.upper()} {name} "
                    f"(line {definition.node.span.line}) above this statement",
                )
            return None
        self.used.add(name)
        if definition.kind == "source":
            source = self.sources.get(name)
            if source is None:
                return None
            if relation.side_output is None:
                return FromSource(name=name, span=relation.span), _qualified(source.schema, name)
            wanted = relation.side_output.value
            if wanted == catalog.ERRORS_OUTPUT and source.on_error == "route":
                self.read_errors.add(name)
                errors = FromSourceErrors(source=name, span=relation.span)
                return errors, _qualified(ERRORS_SCHEMA, name)
            self.reporter.error(
                "E0106",
                f"source '{name}' has no side output '{wanted}'",
                relation.side_output.span,
                help=f"a json or csv file source with on_error = 'route' has the side output "
                f"'{catalog.ERRORS_OUTPUT}' (its malformed records); other side outputs come "
                "from a view's ROUTE step",
            )
            return None
        view_def = self.views.get(name)
        if view_def is None:
            return None
        if relation.side_output is None:
            schema = _qualified(view_def.stream.schema, name)
            return FromView(name=name, span=relation.span), schema
        output_name = relation.side_output.value
        for output in view_def.side_outputs:
            if output.name == output_name:
                origin = FromSideOutput(view=name, output=output_name, span=relation.span)
                return origin, _qualified(output.schema, name)
        outputs = [o.name for o in view_def.side_outputs]
        self.reporter.error(
            "E0106",
            f"view '{name}' has no side output '{output_name}'",
            relation.side_output.span,
            help=did_you_mean(output_name, outputs)
            or (f"its side outputs: {', '.join(outputs)}" if outputs else "it has no ROUTE step"),
        )
        return None

    def _cycle(self, start: str, target: str) -> list[str] | None:
        """The path of view references from ``start`` back to ``target``, if there is one."""
        path = [target, start]
        seen = {start}

        def visit(name: str) -> bool:
            definition = self.definitions.get(name)
            if definition is None or not isinstance(definition.node, ast.CreateView):
                return False
            for ref in _query_references(definition.node.query):
                if ref == target:
                    path.append(target)
                    return True
                if ref not in seen:
                    seen.add(ref)
                    path.append(ref)
                    if visit(ref):
                        return True
                    path.pop()
            return False

        return path if visit(start) else None

    # ------------------------------------------------------------ queries

    def _query(
        self, query: ast.Query, side_outputs: list[SideOutput], view: str | None
    ) -> Stream | None:
        if isinstance(query, ast.SqlQuery):
            lowered = (
                lower_sql_query(query, self.reporter)
                if check_flink_windows(query, self.reporter)  # Flink's TUMBLE(...): E0602
                and self.checks.sql_query(query, self.reporter)  # unknown functions first
                else None
            )
            if lowered is None:
                self.used.update(_query_references(query))
                return None
            query = lowered
        resolved = self._reference(query.source, view)
        if resolved is None:
            return None
        origin, schema = resolved
        steps: list[Step] = []
        keys: tuple[str, ...] | None = None
        ast_steps = list(query.steps)
        ok = True
        i = 0
        while i < len(ast_steps):
            node = ast_steps[i]
            if isinstance(node, ast.Window):
                following = ast_steps[i + 1] if i + 1 < len(ast_steps) else None
                if not isinstance(following, ast.Aggregate):
                    self.reporter.error(
                        "E0208",
                        "WINDOW must be followed by AGGREGATE",
                        node.keyword_span,
                        help="add |> AGGREGATE count(*) AS n (or other aggregates) after it",
                    )
                    return None
                result = self._aggregate(following, schema, keys, node)
                i += 2
            else:
                result = self._step(node, schema, keys, side_outputs, len(steps), view)
                i += 1
            if result is None:
                ok = False
                continue
            steps.append(result)
            schema = result.schema
            keys = _keys_after(result, keys)
        if not ok:
            return None
        return Stream(origin=origin, steps=tuple(steps), schema=schema, keys=keys, span=query.span)

    def _step(
        self,
        node: ast.Step,
        schema: Schema,
        keys: tuple[str, ...] | None,
        side_outputs: list[SideOutput],
        index: int,
        view: str | None,
    ) -> Step | None:
        if isinstance(node, ast.Aggregate):
            return self._aggregate(node, schema, keys, None)
        if isinstance(node, ast.KeyBy | ast.Partition | ast.PartitionBy):
            for option in node.hints:
                self.reporter.error(
                    "E0306",
                    f"hints are not allowed on a partition step ({_keyword(node)}): '{option.key}'",
                    option.key_span,
                    help="a partition step only chooses the exchange; put the hint on the "
                    "step after it",
                )
            hints = Hints()
        else:
            hints = self._step_hints(node)
        scope = Scope(schema)
        if isinstance(node, ast.Where):
            if not self._boolean(node.condition, scope, "WHERE"):
                return None
            return Step(kind="where", node=node, schema=schema, hints=hints, span=node.span)
        if isinstance(node, ast.Select | ast.Extend):
            return self._select(node, schema, hints)
        if isinstance(node, ast.Drop):
            names = {c.name for c in schema}
            ok = True
            for column in node.columns:
                if column.value not in names:
                    self._unknown_column(column, schema)
                    ok = False
            if not ok:
                return None
            dropped = {c.value for c in node.columns}
            remaining = tuple(c for c in schema if c.name not in dropped)
            if not remaining:
                self.reporter.error("E0209", "DROP removes every column", node.keyword_span)
                return None
            return Step(kind="drop", node=node, schema=remaining, hints=hints, span=node.span)
        if isinstance(node, ast.Rename):
            return self._rename(node, schema, hints)
        if isinstance(node, ast.Explode):
            return self._explode(node, schema, hints)
        if isinstance(node, ast.KeyBy):
            texts = []
            for key in node.keys:
                if self.checks.type(key, scope, self.reporter) is None:
                    return None
                texts.append(_key_text(key))
            return Step(
                kind="key_by",
                node=node,
                schema=schema,
                hints=hints,
                span=node.span,
                keys=tuple(texts),
                partition="HASH",
            )
        if isinstance(node, ast.Partition):
            return Step(
                kind="partition",
                node=node,
                schema=schema,
                hints=hints,
                span=node.span,
                partition=node.kind,
            )
        if isinstance(node, ast.PartitionBy):
            if self.checks.type(node.expr, scope, self.reporter) is None:
                return None
            return Step(
                kind="partition_by",
                node=node,
                schema=schema,
                hints=hints,
                span=node.span,
                keys=(_key_text(node.expr),),
                partition="CUSTOM",
            )
        if isinstance(node, ast.Deduplicate):
            return self._deduplicate(node, schema, hints)
        if isinstance(node, ast.Join):
            return self._join(node, schema, hints, view)
        if isinstance(node, ast.UnionAll):
            return self._union(node, schema, hints, view)
        if isinstance(node, ast.Route):
            return self._route(node, schema, hints, side_outputs, index, view)
        raise AssertionError(f"unhandled step {type(node).__name__}")

    def _boolean(self, condition: ast.SqlExpr, scope: Scope, where: str) -> bool:
        type_text = self.checks.type(condition, scope, self.reporter)
        if type_text is None:
            return False
        if type_text not in (BOOLEAN, UNKNOWN):
            self.reporter.error(
                "E0210",
                f"{where} condition must be BOOLEAN, but '{condition.text}' is {type_text}",
                condition.span,
                help="compare it with something, e.g. x > 0 or x IS NOT NULL",
            )
            return False
        return True

    def _unknown_column(self, name: ast.Name, schema: Schema) -> None:
        names = [c.name for c in schema]
        self.reporter.error(
            "E0201",
            f"unknown column '{name.value}'",
            name.span,
            help=did_you_mean(name.value, names) or "columns here: " + ", ".join(names),
        )

    def _item_name(self, item: ast.SelectItem) -> str | None:
        if item.alias is not None:
            return item.alias.value
        tree = item.expr.tree
        if isinstance(tree, exp.Column) and not isinstance(tree.this, exp.Star):
            return tree.name
        if isinstance(tree, exp.Dot):
            return tree.name
        self.reporter.error(
            "E0211",
            f"'{item.expr.text}' needs a name",
            item.expr.span,
            help=f"add AS <name>: {item.expr.text} AS my_column",
        )
        return None

    def _select(self, node: ast.Select | ast.Extend, schema: Schema, hints: Hints) -> Step | None:
        scope = Scope(schema)
        out: list[Column] = [] if isinstance(node, ast.Select) else list(schema)
        ok = True
        for item in node.items:
            tree = item.expr.tree
            if isinstance(tree, exp.Star) or (
                isinstance(tree, exp.Column) and isinstance(tree.this, exp.Star)
            ):
                qualifier = tree.table if isinstance(tree, exp.Column) else None
                chosen = [c for c in schema if not qualifier or c.qualifier == qualifier]
                out.extend(replace(c, qualifier=None) for c in chosen)
                continue
            if is_aggregate(item.expr.tree):
                self.reporter.error(
                    "E0212",
                    f"aggregate '{item.expr.text}' in {_keyword(node)}",
                    item.expr.span,
                    help="aggregates belong in AGGREGATE (after KEY BY for per-key results)",
                )
                ok = False
                continue
            type_text = self.checks.type(item.expr, scope, self.reporter)
            name = self._item_name(item)
            if type_text is None or name is None:
                ok = False
                continue
            if isinstance(node, ast.Extend) and any(c.name == name for c in schema):
                self.reporter.error(
                    "E0213",
                    f"EXTEND adds column '{name}', which already exists",
                    (item.alias or item.expr).span,
                    help="choose a new name, or replace it with SELECT",
                )
                ok = False
                continue
            qualifier = None
            if isinstance(item.expr.tree, exp.Column) and item.alias is None:
                matches = scope.lookup(name, item.expr.tree.table or None)
                qualifier = matches[0].qualifier if len(matches) == 1 else None
            out.append(Column(name, type_text, qualifier))
        if not ok:
            return None
        if not self._unique(out, node.span):
            return None
        kind = "select" if isinstance(node, ast.Select) else "extend"
        return Step(kind=kind, node=node, schema=tuple(out), hints=hints, span=node.span)

    def _unique(self, columns: Sequence[Column], span: Span) -> bool:
        seen: set[str] = set()
        for column in columns:
            key = column.name
            if key in seen:
                self.reporter.error(
                    "E0206",
                    f"column '{column.name}' appears twice in the output",
                    span,
                    help="rename one of them with AS",
                )
                return False
            seen.add(key)
        return True

    def _rename(self, node: ast.Rename, schema: Schema, hints: Hints) -> Step | None:
        mapping: dict[str, str] = {}
        names = [c.name for c in schema]
        ok = True
        for item in node.items:
            if item.old.value not in names:
                self._unknown_column(item.old, schema)
                ok = False
                continue
            mapping[item.old.value] = item.new.value
        if not ok:
            return None
        out = tuple(replace(c, name=mapping.get(c.name, c.name)) for c in schema)
        if not self._unique(out, node.span):
            return None
        return Step(kind="rename", node=node, schema=out, hints=hints, span=node.span)

    def _explode(self, node: ast.Explode, schema: Schema, hints: Hints) -> Step | None:
        type_text = self.checks.type(node.expr, Scope(schema), self.reporter)
        if type_text is None:
            return None
        if node.alias is None:
            self.reporter.error(
                "E0211",
                "EXPLODE needs a name for the new column",
                node.expr.span,
                help=f"EXPLODE {node.expr.text} AS item",
            )
            return None
        if type_text.startswith("ARRAY<"):
            element = type_text[len("ARRAY<") : -1]
        elif type_text == UNKNOWN:
            element = UNKNOWN
        else:
            self.reporter.error(
                "E0214",
                f"EXPLODE needs an ARRAY, but '{node.expr.text}' is {type_text}",
                node.expr.span,
                help="split a string into an array with split(text, pattern)",
            )
            return None
        name = node.alias.value
        if any(c.name == name for c in schema):
            self.reporter.error(
                "E0213",
                f"EXPLODE adds column '{name}', which already exists",
                node.alias.span,
                help="choose a new name",
            )
            return None
        out = (*schema, Column(name, element, None))
        return Step(kind="explode", node=node, schema=out, hints=hints, span=node.span)

    def _aggregate(
        self,
        node: ast.Aggregate,
        schema: Schema,
        keys: tuple[str, ...] | None,
        window: ast.Window | None,
    ) -> Step | None:
        hints = self._step_hints(node)
        if window is not None and window.hints:
            window_hints = self._step_hints(window)
            for key, span in window_hints.spans.items():
                if key in hints.spans:
                    self.reporter.error(
                        "E0303",
                        f"hint '{key}' is given on both WINDOW and AGGREGATE",
                        span,
                        help="give it once, on AGGREGATE",
                    )
                    return None
            hints = Hints(
                **{
                    f: getattr(hints, f) if f in hints.spans else getattr(window_hints, f)
                    for f in ("name", "uid", "parallelism", "max_parallelism", "slot_sharing_group")
                },
                chaining=hints.chaining if "chaining" in hints.spans else window_hints.chaining,
                spans={**window_hints.spans, **hints.spans},
            )
        scope = Scope(schema)
        out: list[Column] = []
        ok = True
        for key in keys or ():
            matches = [c for c in schema if c.name == key]
            if len(matches) != 1:
                self.reporter.error(
                    "E0215",
                    f"AGGREGATE outputs its keys as columns, but the key '{key}' is an expression",
                    node.keyword_span,
                    help="name the key first: |> EXTEND <expr> AS k |> KEY BY k",
                )
                return None
            out.append(replace(matches[0], qualifier=None))
        if window is not None:
            if not self._window(window, schema):
                return None
            out.append(Column("window_start", TIMESTAMP))
            out.append(Column("window_end", TIMESTAMP))
        for item in node.items:
            type_text = self.checks.type(item.expr, scope, self.reporter)
            name = self._item_name(item)
            if type_text is None or name is None:
                ok = False
                continue
            if not self._aggregated(item.expr, keys or ()):
                ok = False
                continue
            out.append(Column(name, type_text))
        if not ok or not self._unique(out, node.span):
            return None
        kind = "window_aggregate" if window is not None else "aggregate"
        span = window.span.cover(node.span) if window is not None else node.span
        return Step(
            kind=kind,
            node=node,
            schema=tuple(out),
            hints=hints,
            span=span,
            keys=keys or (),
            window=window,
        )

    def _aggregated(self, expr: ast.SqlExpr, keys: Sequence[str]) -> bool:
        """Every column an AGGREGATE item reads must sit inside an aggregate function."""
        if not has_aggregate(expr.tree):
            self.reporter.error(
                "E0216",
                f"'{expr.text}' is not an aggregate",
                expr.span,
                help="use an aggregate function such as count(*), sum(x), max(x); "
                "key columns are output already",
            )
            return False
        for column in expr.tree.find_all(exp.Column):
            if not inside_aggregate(column) and column.name not in keys:
                self.reporter.error(
                    "E0216",
                    f"column '{column.sql()}' is used outside an aggregate function",
                    node_span(expr, column),
                    help="wrap it in an aggregate (max, first, ...) or add it to KEY BY",
                )
                return False
        return True

    def _window(self, window: ast.Window, schema: Schema) -> bool:
        expected = {"TUMBLE": 2, "HOP": 3, "SESSION": 2}[window.kind]
        shapes = {
            "TUMBLE": "TUMBLE(ts, INTERVAL 1 MINUTE)",
            "HOP": "HOP(ts, INTERVAL 1 MINUTE, INTERVAL 10 SECONDS)",
            "SESSION": "SESSION(ts, INTERVAL 5 MINUTES)",
        }
        if len(window.args) != expected:
            self.reporter.error(
                "E0217",
                f"{window.kind} takes {expected} arguments, found {len(window.args)}",
                window.span,
                help=f"for example {shapes[window.kind]}",
            )
            return False
        time_arg = window.args[0]
        if not isinstance(time_arg.tree, exp.Column):
            self.reporter.error(
                "E0217",
                f"the first argument of {window.kind} must be a TIMESTAMP column",
                time_arg.span,
                help=f"for example {shapes[window.kind]}",
            )
            return False
        type_text = self.checks.type(time_arg, Scope(schema), self.reporter)
        if type_text is None:
            return False
        if type_text not in (TIMESTAMP, UNKNOWN):
            self.reporter.error(
                "E0217",
                f"window time column '{time_arg.text}' is {type_text}, not TIMESTAMP",
                time_arg.span,
            )
            return False
        for arg in window.args[1:]:
            if not _is_interval(arg.tree):
                self.reporter.error(
                    "E0217",
                    f"'{arg.text}' is not an interval",
                    arg.span,
                    help="write sizes as INTERVAL 10 SECONDS or '10 seconds'",
                )
                return False
        return True

    def _deduplicate(self, node: ast.Deduplicate, schema: Schema, hints: Hints) -> Step | None:
        keys: list[str] = []
        for column in node.columns:
            if not isinstance(column.tree, exp.Column):
                self.reporter.error(
                    "E0218",
                    "DEDUPLICATE ON takes column names",
                    column.span,
                    help="add the expression as a column with EXTEND first",
                )
                return None
            if self.checks.type(column, Scope(schema), self.reporter) is None:
                return None
            keys.append(column.tree.name)
        if node.within is not None and not _is_interval(node.within.tree):
            self.reporter.error(
                "E0217",
                f"'{node.within.text}' is not an interval",
                node.within.span,
                help="for example WITHIN INTERVAL 1 HOUR",
            )
            return None
        return Step(
            kind="deduplicate",
            node=node,
            schema=schema,
            hints=hints,
            span=node.span,
            keys=tuple(keys) if keys else tuple(c.name for c in schema),
        )

    def _join(self, node: ast.Join, schema: Schema, hints: Hints, view: str | None) -> Step | None:
        resolved = self._reference(node.right, view)
        if resolved is None:
            return None
        origin, right_schema = resolved
        if node.condition is None:
            self.reporter.error(
                "E0219",
                "JOIN needs a condition",
                node.right.span,
                help=f"add ON, e.g. JOIN {node.right.text} ON a.id = {node.right.name.value}.id",
            )
            return None
        left_names = {c.qualifier for c in schema}
        right_name = node.right.name.value
        if right_name in left_names:
            self.reporter.error(
                "E0220",
                f"both sides of the JOIN are called '{right_name}'",
                node.right.span,
                help="join a view defined over it instead, so each side has its own name",
            )
            return None
        combined = (*schema, *right_schema)
        scope = Scope(combined)
        if not self._boolean(node.condition, scope, "JOIN"):
            return None
        left_keys, right_keys = _equi_keys(node.condition.tree, schema, right_schema)
        if not left_keys:
            self.reporter.error(
                "E0221",
                "JOIN needs an equality between the two sides",
                node.condition.span,
                help=f"for example ON left_col = {right_name}.col; both sides are "
                "hash-partitioned on it",
            )
            return None
        right_stream = Stream(
            origin=origin, steps=(), schema=right_schema, keys=right_keys, span=node.right.span
        )
        return Step(
            kind="join",
            node=node,
            schema=combined,
            hints=hints,
            span=node.span,
            inputs=(right_stream,),
            keys=left_keys,
        )

    def _union(
        self, node: ast.UnionAll, schema: Schema, hints: Hints, view: str | None
    ) -> Step | None:
        others: list[Stream] = []
        ok = True
        for relation in node.others:
            resolved = self._reference(relation, view)
            if resolved is None:
                ok = False
                continue
            origin, other_schema = resolved
            same = len(other_schema) == len(schema) and all(
                a.name == b.name and types_match(a.type, b.type)
                for a, b in zip(schema, other_schema, strict=True)
            )
            if not same:
                self.reporter.error(
                    "E0222",
                    f"UNION ALL needs the same columns on every input; '{relation.text}' differs",
                    relation.span,
                    help=f"stream: ({_schema_text(schema)}); {relation.text}: "
                    f"({_schema_text(other_schema)})",
                )
                ok = False
                continue
            others.append(
                Stream(origin=origin, steps=(), schema=other_schema, keys=None, span=relation.span)
            )
        if not ok:
            return None
        out = tuple(replace(c, qualifier=None) for c in schema)
        return Step(
            kind="union", node=node, schema=out, hints=hints, span=node.span, inputs=tuple(others)
        )

    def _route(
        self,
        node: ast.Route,
        schema: Schema,
        hints: Hints,
        side_outputs: list[SideOutput],
        index: int,
        view: str | None,
    ) -> Step | None:
        ok = True
        scope = Scope(schema)
        for branch in node.branches:
            if not self._boolean(branch.condition, scope, "ROUTE"):
                ok = False
                continue
            name = branch.name.value
            if any(o.name == name for o in side_outputs):
                self.reporter.error(
                    "E0223",
                    f"side output '{name}' is defined twice",
                    branch.name.span,
                    help="give each ROUTE branch its own name",
                )
                ok = False
                continue
            side_outputs.append(
                SideOutput(name=name, step_index=index, schema=schema, span=branch.name.span)
            )
        if not ok:
            return None
        return Step(kind="route", node=node, schema=schema, hints=hints, span=node.span)

    # ------------------------------------------------------------ whole-program checks

    def _check_program(self, program: Program) -> None:
        if not program.inserts and not self.reporter.has_errors:
            last = self.tree.statements[-1].span if self.tree.statements else None
            span = last or Span(self.file, 1, 1, 1, 1)
            self.reporter.error(
                "E0501",
                "the program has no INSERT INTO, so the job does nothing",
                span,
                help="write results to a sink: INSERT INTO <sink> FROM <view or source> ...;",
            )
        for source in program.sources:
            if source.on_error == "route" and source.name not in self.read_errors:
                self.reporter.error(
                    "E0412",
                    f"source '{source.name}' routes malformed records to "
                    f"{source.name}.{catalog.ERRORS_OUTPUT}, but nothing reads them",
                    self.on_error_spans.get(source.name, source.span),
                    help=f"write them somewhere (INSERT INTO <sink> FROM {source.name}."
                    f"{catalog.ERRORS_OUTPUT}), or remove on_error to fail on the first "
                    "malformed record; flowc never drops records silently",
                )
        uids: dict[str, Span] = {}
        settings = program.settings
        for hints, where in _all_hints(program):
            if hints.uid is not None:
                span = hints.spans["uid"]
                if hints.uid in uids:
                    self.reporter.error(
                        "E0307",
                        f"uid '{hints.uid}' is used twice",
                        span,
                        help=f"uids must be unique; first used at {uids[hints.uid]}",
                    )
                else:
                    uids[hints.uid] = span
            parallelism = hints.parallelism or settings.parallelism
            max_parallelism = hints.max_parallelism or settings.max_parallelism
            hinted = hints.parallelism is not None or hints.max_parallelism is not None
            if hinted and max_parallelism is not None and parallelism > max_parallelism:
                span = (
                    hints.spans.get("parallelism")
                    or hints.spans.get("max_parallelism")
                    or settings.spans.get("parallelism")
                    or where
                )
                self.reporter.error(
                    "E0305",
                    f"parallelism {parallelism} is larger than max_parallelism {max_parallelism}",
                    span,
                    help="Maximum parallelism must not be smaller than parallelism: "
                    "raise max_parallelism or lower parallelism",
                )
        if settings.max_parallelism is None:
            for step in _all_steps(program):
                if step.kind in STATEFUL_KINDS and step.hints.max_parallelism is None:
                    parallelism = step.hints.parallelism or settings.parallelism
                    key_groups = compute_default_max_parallelism(parallelism)
                    keyword = step.window.keyword_span if step.window else step.node.keyword_span
                    self.reporter.warning(
                        "W0001",
                        f"stateful {_keyword(step.window or step.node)} without max_parallelism: "
                        f"its state is split into {key_groups} key groups on the first run, "
                        "fixed for the life of its checkpoints",
                        keyword,
                        help="SET max_parallelism = <n>; (or a max_parallelism hint), as Flink "
                        "advises for every stateful job",
                    )
        for name, definition in self.definitions.items():
            if name not in self.used and name in {**self.sources, **self.views, **self.sinks}:
                self.reporter.warning(
                    "W0004",
                    f"{definition.kind} '{name}' is never used",
                    definition.node.name.span,
                )


# ---------------------------------------------------------------- helpers


def _qualified(schema: Schema, qualifier: str) -> Schema:
    return tuple(replace(c, qualifier=qualifier) for c in schema)


def _schema_text(schema: Schema) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in schema)


def _keyword(node: ast.Step) -> str:
    if isinstance(node, ast.Partition):
        return node.kind
    names = {
        ast.KeyBy: "KEY BY",
        ast.PartitionBy: "PARTITION BY",
        ast.UnionAll: "UNION ALL",
        ast.Join: "JOIN",
        ast.Window: "WINDOW",
    }
    return names.get(type(node), type(node).__name__.upper())


def _key_text(expr: ast.SqlExpr) -> str:
    if isinstance(expr.tree, exp.Column):
        return expr.tree.name
    return str(expr.tree.sql("spark"))


def _keys_after(step: Step, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Keys stay in force through row-wise steps that keep the key columns."""
    if step.kind == "key_by":
        return step.keys
    if step.kind in ("partition", "partition_by", "aggregate", "window_aggregate", "union"):
        return None
    if step.kind in ("join", "deduplicate"):
        return step.keys
    if keys is None:
        return None
    names = {c.name for c in step.schema}
    return keys if all(k in names for k in keys) else None


def _is_interval(tree: exp.Expr) -> bool:
    if isinstance(tree, exp.Interval):
        return True
    return isinstance(tree, exp.Literal) and tree.is_string


def _equi_keys(
    condition: exp.Expr, left: Schema, right: Schema
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column pairs ``left = right`` among the condition's AND-ed terms."""
    left_keys: list[str] = []
    right_keys: list[str] = []
    terms = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    for term in terms:
        if not isinstance(term, exp.EQ):
            continue
        a, b = term.left, term.right
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        side_a, side_b = _side(a, left, right), _side(b, left, right)
        if side_a == "left" and side_b == "right":
            left_keys.append(a.name)
            right_keys.append(b.name)
        elif side_a == "right" and side_b == "left":
            left_keys.append(b.name)
            right_keys.append(a.name)
    return tuple(left_keys), tuple(right_keys)


def _side(column: exp.Column, left: Schema, right: Schema) -> str | None:
    qualifier = column.table or None
    in_left = any(c.name == column.name and qualifier in (None, c.qualifier) for c in left)
    in_right = any(c.name == column.name and qualifier in (None, c.qualifier) for c in right)
    if in_left and not in_right:
        return "left"
    if in_right and not in_left:
        return "right"
    return None


def _query_references(query: ast.Query) -> list[str]:
    if isinstance(query, ast.SqlQuery):
        return [t.name for t in query.tree.find_all(exp.Table)]
    refs = [query.source.name.value]
    for step in query.steps:
        if isinstance(step, ast.Join):
            refs.append(step.right.name.value)
        elif isinstance(step, ast.UnionAll):
            refs.extend(r.name.value for r in step.others)
    return refs


def _all_steps(program: Program) -> Iterable[Step]:
    def walk(stream: Stream) -> Iterable[Step]:
        for step in stream.steps:
            yield step
            for other in step.inputs:
                yield from walk(other)

    for view in program.views:
        yield from walk(view.stream)
    for insert in program.inserts:
        yield from walk(insert.stream)


def _all_hints(program: Program) -> Iterable[tuple[Hints, Span]]:
    for source in program.sources:
        yield source.hints, source.span
    for step in _all_steps(program):
        if step.kind not in PARTITION_KINDS:
            yield step.hints, step.span
    for sink in program.sinks:
        yield sink.hints, sink.span


def _unprintable(text: str) -> str | None:
    """The first NUL or lone surrogate in ``text``, as U+XXXX; None if none.

    A job name reaches Spark (its application name, through py4j, which sends UTF-8: a
    lone surrogate cannot go) and C strings (a NUL ends them); the job name is refused
    with E0413 (docs/language.md, "Job names"). Other control characters are written as
    escapes wherever the name lands (generated docstrings, checkpoint folder names).
    """
    for char in text:
        if char == "\0" or 0xD800 <= ord(char) < 0xE000:
            return f"U+{ord(char):04X}"
    return None
