"""The generated program's own functions, written as code that ruff and mypy check.

Code generation copies each function's source text into the program it writes
(:func:`source_text`), so the program stays standalone: it imports only pyspark and the
standard library, and runs under ``spark-submit`` where flowc is not installed. Importing
them from flowc instead would tie every deployed job to flowc's version.

The functions run only inside that program, whose header imports pyspark's names; here
those names are imported for the type checker alone, so ``flowc compile`` never imports
pyspark. Their text is the program's text byte for byte (the stage snapshots hold it), so
the formatter leaves the functions as written.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from flowc.program import BUCKET_COLUMN, WATERMARK_COLUMN

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed
    from pyspark import cloudpickle
    from pyspark.errors import PySparkException
    from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessor,
        StatefulProcessorHandle,
        TimerValues,
    )
    from pyspark.sql.types import (
        BinaryType,
        DataType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
else:
    #: The program imports pyspark's; flowc never does (the class is copied as text).
    StatefulProcessor = object

#: The generated program defines its own after these functions: its json and csv sources'
#: names, in declaration order (:func:`malformed_record` reports a failure by the index).
PARSED_SOURCES: list[str] = []
#: Its folder; its Python functions by name: (module, attribute, return type, on Arrow,
#: the kind of value returned); the callables given to flowc.compile; and each call's
#: registered name, function and place.
BASE_DIR = "."
#: Whether installed modules come before the job's folder's (an untrusted job's).
INSTALLED_FIRST = False
FUNCTIONS: dict[str, tuple[str | None, str | None, str, bool, str]] = {}
EMBEDDED_FUNCTIONS: dict[str, Callable[..., object]] = {}
CALLS: list[tuple[str, str, str]] = []

#: How a malformed record's failure message is framed, so that :func:`malformed_record` can
#: find it in Spark's error text: the marker, then fields apart, then the end.
MALFORMED = "flowc: malformed record"
FIELD_SEPARATOR = "\x1f"
END = "\x1e"


def source_text(functions: tuple[Callable[..., object], ...]) -> str:
    """The functions' source as the generated program writes them: two blank lines apart,
    without the checkers' pragmas (``# noqa``), which are this module's, not the program's."""
    text = "\n\n\n".join(inspect.getsource(function).strip("\n") for function in functions)
    return _PRAGMA.sub("", text)


_PRAGMA = re.compile(r"  # (noqa|type: ignore)\b.*$", re.MULTILINE)


# fmt: off
# ---------------------------------------------------------------- batch mode

def executed_plan(df: DataFrame) -> str | None:
    """The physical plan Spark will run, to count its exchanges (None through Spark Connect)."""
    jdf = getattr(df, '_jdf', None)
    return None if jdf is None else str(jdf.queryExecution().executedPlan().toString())


def replace_output(path: str, write: Callable[[str], None]) -> None:
    """A files sink's batch result replacing the previous run's output: written by
    ``write`` into a new folder beside ``path``, which is renamed to ``path`` only once the
    write succeeded (Spark's own overwrite deletes the old output before its job runs, so a
    failed job would leave none). The old output is renamed aside, then deleted."""
    import shutil
    import uuid

    path = os.path.normpath(path)
    stamp = uuid.uuid4().hex[:12]
    fresh = f'{path}.flowc-new-{stamp}'
    try:
        write(fresh)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    old = f'{path}.flowc-old-{stamp}'
    if os.path.exists(path):
        os.rename(path, old)
    os.rename(fresh, path)
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- the session


def no_variable_substitution(spark: SparkSession) -> None:
    """Turn Spark's SQL variable substitution off before any SQL text is handed over: on,
    Spark replaces ${env:VAR}, ${system:prop} and ${spark:key} in every expression with
    the environment, JVM properties and settings, and an unset ${hivevar:x} with nothing,
    which can make a comment's text code. This program's text means what it says."""
    spark.conf.set('spark.sql.variable.substitute', 'false')


# ---------------------------------------------------------------- failures


def spark_failed(error: BaseException) -> bool:
    """Whether Spark failed (PySpark's errors, the JVM's through py4j), not this program."""
    if isinstance(error, PySparkException):
        return True
    return any(kind.__module__.startswith('py4j.') for kind in type(error).__mro__)


def stop_queries(spark: SparkSession | None) -> None:
    """Stop the queries still running after one failed (as awaitAnyTermination would)."""
    if spark is None:
        return
    try:
        for query in spark.streams.active:
            query.stop()
    except Exception as error:
        if not spark_failed(error):
            raise  # Spark being gone is no news: the failure is what to report


def report_failure(error: BaseException) -> None:
    """Spark's failure as one message on standard error: its first lines, no stack trace."""
    import sys

    message = malformed_record(error)
    if message is None:
        text = str(error).strip()
        wrapper = ' terminated with exception: '
        if text.startswith('[STREAM_FAILED] ') and wrapper in text.split('\n', 1)[0]:
            text = text.split(wrapper, 1)[1]
        for end in ('\n=== Streaming Query ===', '\nJVM stacktrace:', '\n\tat '):
            text = text.split(end, 1)[0]
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        lines = [line for line in lines if not line.lstrip().startswith('SQLSTATE: ')][:8]
        message = 'error: ' + '\n'.join(lines or ['Spark failed']) + '\n'
    sys.stderr.write(message)


# ---------------------------------------------------------------- malformed records


def quoted(name: str) -> str:
    """A column reference Spark reads as one name, whatever its characters."""
    return '`' + name.replace('`', '``') + '`'


def every_column_read(columns: list[tuple[str, str]]) -> Column:
    """True on every row, mentioning every declared column: Spark checks only the columns
    a query reads, so without it a bad value in a column the query drops would pass."""
    flags = [F.isnull(F.col(quoted(name))).cast('int') for name, _ in columns]
    return sum(flags, F.lit(0)) >= 0


def malformed_reason(
    fmt: str, columns: list[tuple[str, str]], csv_options: dict[str, str], record: str
) -> Column:
    """Why Spark could not read a record: the columns whose values do not fit their type."""
    declared = ', '.join(f'{name} {type_}' for name, type_ in columns)
    if fmt == 'json':
        fields = F.from_json(F.col(record), 'MAP<STRING, STRING>')
        values = [fields[name] for name, _ in columns]
        unreadable = F.lit('not a JSON object')
        otherwise = F.lit(f'does not match the declared columns ({declared})')
    else:
        ddl = ', '.join(f'_{index} STRING' for index in range(len(columns)))
        fields = F.from_csv(F.col(record), ddl, csv_options)
        values = [fields[f'_{index}'] for index in range(len(columns))]
        unreadable = F.lit('not a CSV line')
        otherwise = F.lit(f'expected {len(columns)} fields ({declared})')
    problems = [
        F.when(
            value.isNotNull() & F.isnull(F.col(quoted(name))),
            F.concat(
                F.lit(f'column {name!r} ({type_}): cannot read '),
                F.lit("'"),
                F.regexp_replace(value, '[\\x00-\\x1f]', '?'),
                F.lit("'"),
            ),
        )
        for (name, type_), value in zip(columns, values)  # noqa: B905
        if type_ != 'STRING'
    ]
    found = F.concat_ws('; ', *problems) if problems else F.lit('')
    return F.when(fields.isNull(), unreadable).when(found != '', found).otherwise(otherwise)


def fail_on_malformed(
    df: DataFrame,
    source: int,
    fmt: str,
    columns: list[tuple[str, str]],
    csv_options: dict[str, str],
    record: str,
    file: str,
) -> DataFrame:
    """on_error = 'fail': the first malformed record stops the query, naming its file."""
    reason = malformed_reason(fmt, columns, csv_options, record)
    message = F.concat_ws(
        FIELD_SEPARATOR, F.lit(MALFORMED), F.lit(str(source)), F.col(file), reason,
        F.col(record), F.lit(END),
    )
    check = F.when(F.col(record).isNotNull(), F.raise_error(message))
    return df.where(check.otherwise(every_column_read(columns))).drop(record, file)


def malformed_records(
    df: DataFrame,
    fmt: str,
    columns: list[tuple[str, str]],
    csv_options: dict[str, str],
    record: str,
    file: str,
) -> DataFrame:
    """on_error = 'route': the source's side output errors (raw, file, error)."""
    bad = df.where(F.col(record).isNotNull() & every_column_read(columns))
    return bad.select(
        F.col(record).alias('raw'),
        F.col(file).alias('file'),
        malformed_reason(fmt, columns, csv_options, record).alias('error'),
    )


def well_formed_records(
    df: DataFrame, columns: list[tuple[str, str]], record: str, file: str
) -> DataFrame:
    """on_error = 'route': the source's main output, every record Spark could read."""
    return df.where(F.col(record).isNull() & every_column_read(columns)).drop(record, file)


# ---------------------------------------------------------------- debezium-json


def debezium_changes(
    df: DataFrame,
    columns: list[tuple[str, str]],
    payload: bool,
    json_options: dict[str, str],
    names: tuple[str, str, str, str],
) -> DataFrame:
    """A debezium-json source's changes, as Flink's format gives them: each envelope's
    ``op`` c or r is +I of ``after``, u is -U of ``before`` then +U of ``after``, d is -D
    of ``before`` (``names``: the record, file, reason and op columns). A malformed
    envelope gives one row of NULLs with its reason; blank lines (tombstones) none. Each
    envelope's rows stay in its place: ``inline`` keeps a partition's order."""
    record, file, reason, op = names
    fields = ', '.join(f'{quoted(name)}: {type_}' for name, type_ in columns)
    envelope = f'before: STRUCT<{fields}>, after: STRUCT<{fields}>, op: STRING'
    corrupt = '__flowc_corrupt'
    body = f'payload: STRUCT<{envelope}>' if payload else envelope
    options = {**json_options, 'mode': 'PERMISSIVE', 'columnNameOfCorruptRecord': corrupt}
    parsed = F.from_json(F.col(record), f'STRUCT<{body}, {corrupt}: STRING>', options)
    df = df.where(~F.col(record).rlike('^\\s*$')).withColumn('__flowc_envelope', parsed)
    top = F.col('__flowc_envelope')
    env = top['payload'] if payload else top
    kind = env['op']
    raw_body = 'before: MAP<STRING, STRING>, after: MAP<STRING, STRING>'
    raw_schema = f'STRUCT<payload: STRUCT<{raw_body}>>' if payload else f'STRUCT<{raw_body}>'
    raw = F.from_json(F.col(record), raw_schema)
    raw = raw['payload'] if payload else raw
    problems = [
        F.when(
            raw[side][name].isNotNull() & env[side][name].isNull(),
            F.concat(
                F.lit(f'{side}.{name} ({type_}): cannot read \''),
                F.regexp_replace(raw[side][name], '[\\x00-\\x1f]', '?'),
                F.lit('\''),
            ),
        )
        for side in ('before', 'after')
        for name, type_ in columns
        if type_ != 'STRING'
    ]
    found = F.concat_ws('; ', *problems) if problems else F.lit('')
    declared = ', '.join(f'{name} {type_}' for name, type_ in columns)
    why = (
        F.when(
            top.isNull() | F.from_json(F.col(record), 'MAP<STRING, STRING>').isNull(),
            F.lit('not a JSON object'),
        )
        .when(top[corrupt].isNotNull() & (found != ''), found)
        .when(
            top[corrupt].isNotNull(),
            F.lit(f'the envelope does not match the declared columns ({declared})'),
        )
        .when(env.isNull(), F.lit("no 'payload' (debezium-json.schema-include is true)"))
        .when(kind.isNull(), F.lit("no 'op'"))
        .when(~kind.isin('c', 'r', 'u', 'd'), F.concat(F.lit("unknown op '"), kind, F.lit("'")))
        .when(
            kind.isin('c', 'r', 'u') & env['after'].isNull(),
            F.concat(F.lit("no 'after' for op '"), kind, F.lit("'")),
        )
        .when(
            kind.isin('u', 'd') & env['before'].isNull(),
            F.concat(
                F.lit("no 'before' for op '"), kind,
                F.lit("' (Debezium writes it when the table's REPLICA IDENTITY is FULL)"),
            ),
        )
    )
    df = df.withColumn(reason, why)

    def change(side: str | None, sign: str | None) -> Column:
        values = [
            (env[side][name] if side else F.lit(None).cast(type_)).alias(name)
            for name, type_ in columns
        ]
        return F.struct(*values, F.lit(sign).cast('string').alias(op))

    changes = (
        F.when(F.col(reason).isNotNull(), F.array(change(None, None)))
        .when(kind.isin('c', 'r'), F.array(change('after', '+I')))
        .when(kind == 'u', F.array(change('before', '-U'), change('after', '+U')))
        .otherwise(F.array(change('before', '-D')))
    )
    return df.select(F.inline(changes), F.col(record), F.col(file), F.col(reason))


def fail_on_bad_change(
    df: DataFrame, source: int, names: tuple[str, str, str, str]
) -> DataFrame:
    """on_error = 'fail' for a debezium-json source: the first malformed envelope stops the
    query, naming its file (as :func:`fail_on_malformed`)."""
    record, file, reason, _ = names
    message = F.concat_ws(
        FIELD_SEPARATOR, F.lit(MALFORMED), F.lit(str(source)), F.col(file), F.col(reason),
        F.col(record), F.lit(END),
    )
    check = F.when(F.col(reason).isNotNull(), F.raise_error(message)).otherwise(F.lit(True))
    return df.where(check).drop(record, file, reason)


def bad_changes(df: DataFrame, names: tuple[str, str, str, str]) -> DataFrame:
    """on_error = 'route': a debezium-json source's malformed envelopes (raw, file, error)."""
    record, file, reason, _ = names
    bad = df.where(F.col(reason).isNotNull())
    return bad.select(
        F.col(record).alias('raw'), F.col(file).alias('file'), F.col(reason).alias('error')
    )


def good_changes(df: DataFrame, names: tuple[str, str, str, str]) -> DataFrame:
    """on_error = 'route': a debezium-json source's changes, every well-formed envelope's."""
    record, file, reason, _ = names
    return df.where(F.col(reason).isNull()).drop(record, file, reason)


def malformed_record(error: BaseException) -> str | None:
    """The message for a query a malformed record stopped (None for any other failure):
    the source, the file and the line, the record and why, as flowc's diagnostics read."""
    text = str(error)
    start = text.find(MALFORMED + FIELD_SEPARATOR)
    end = text.find(FIELD_SEPARATOR + END, start)
    if start < 0 or end < 0:
        return None
    _, source, uri, reason, raw = text[start:end].split(FIELD_SEPARATOR, 4)
    name = PARSED_SOURCES[int(source)]
    parsed = urlparse(uri)
    path = unquote(parsed.path) if parsed.scheme in ('', 'file') else None
    line = first_line_of(path, raw) if path is not None else None
    shown = uri
    if path is not None:
        relative = os.path.relpath(path)
        shown = path if relative.startswith('..') else relative
    number = str(line) if line is not None else ''
    pad = ' ' * len(number)
    excerpt = (raw.splitlines() or [''])[0]
    if len(excerpt) > 200:
        excerpt = excerpt[:200] + '...'
    return (
        f'error[E0801]: malformed record in source {name!r}: {reason}\n'
        f'{pad}--> {shown}' + (f':{line}' if line is not None else '') + '\n'
        f'{pad} |\n'
        f'{number} | {excerpt}\n'
        f'{pad} |\n'
        f'{pad} = help: fix or remove the record, or add on_error = \'route\' to source '
        f'{name!r} to send malformed records to FROM {flow_name(name)}.errors\n'
    )


def flow_name(name: str) -> str:
    """A name as a .flow file writes it: back-quoted unless it is a plain identifier."""
    if name.isidentifier() and name.isascii():
        return name
    return '`' + name.replace('`', '``') + '`'


def first_line_of(path: str, raw: str) -> int | None:
    """The line where ``raw`` starts in the file: a query stops at the first record of a
    file it cannot read, so this is the file's first malformed line."""
    target = raw.encode('utf-8')
    try:
        with open(path, 'rb') as handle:
            if b'\n' not in target:
                for number, line in enumerate(handle, 1):
                    if line.rstrip(b'\r\n') == target:
                        return number
                return None
            data = handle.read()
    except OSError:
        return None
    at = data.find(target)
    return data.count(b'\n', 0, at) + 1 if at >= 0 else None


# ---------------------------------------------------------------- Python functions


class FunctionNotLoaded(Exception):
    """A Python function the job calls could not be loaded: its message says which.

    Code generation writes this class as :data:`FUNCTION_NOT_LOADED` says (the source of a
    class is found by parsing its whole module, which CPython 3.11 cannot do while another
    thread changes the recursion limit, as compiles do)."""


def load_functions() -> dict[str, Callable[..., object]]:
    """Each function of FUNCTIONS: from its module, or one EMBEDDED_FUNCTIONS holds
    (flowc.runtime fills it with the callables given to flowc.compile).

    A module of the job's folder is run afresh under a name of its own path, so two jobs
    with a pricing.py each, in one process, never call each other's. Modules that are
    neither installed nor the standard library's are pickled by value: Spark's Python
    workers need not find them on their path. An untrusted job's (INSTALLED_FIRST)
    installed modules are imported as installed, its folder left off the path, so no file
    there shadows one; its own modules run with its folder last on the path, and those
    they import are dropped from sys.modules afterwards. The path is restored either way."""
    import hashlib
    import importlib
    import importlib.util
    import sys
    import sysconfig
    from importlib.machinery import PathFinder

    root = os.path.join(os.path.realpath(BASE_DIR), '')

    def in_folder(path: str) -> bool:
        return os.path.join(os.path.realpath(path), '').startswith(root)

    def installed(top: str, path: list[str]) -> bool:
        for finder in sys.meta_path:
            try:
                if finder is PathFinder:
                    spec = PathFinder.find_spec(top, path)
                elif hasattr(finder, 'find_spec'):
                    spec = finder.find_spec(top, None)
                else:
                    continue
            except (ImportError, ValueError):
                continue
            if spec is not None:
                origin = spec.origin
                return not (origin and os.path.isabs(origin) and in_folder(origin))
        return False

    saved = list(sys.path)
    before = set(sys.modules)
    outside = [entry for entry in saved if not in_folder(entry or os.getcwd())]
    loaded = {}
    try:
        for name, (module, attribute, _, _, _) in FUNCTIONS.items():
            if module is None:
                if name not in EMBEDDED_FUNCTIONS:
                    raise FunctionNotLoaded(
                        f"function '{name}' was given to flowc.compile as a callable: run the "
                        'job with flowc.runtime.run.run_job, which hands it over')
                loaded[name] = EMBEDDED_FUNCTIONS[name]
                continue
            assert attribute is not None
            parts = module.split('.')
            folder = os.path.join(BASE_DIR, *parts[:-1])
            files = [os.path.join(folder, parts[-1] + '.py'),
                     os.path.join(folder, parts[-1], '__init__.py')]
            path = next((f for f in files if os.path.isfile(f)), None)
            if INSTALLED_FIRST:
                if installed(parts[0], outside):
                    path = None
                sys.path[:] = outside if path is None else [*outside, BASE_DIR]
            else:
                sys.path[:] = saved if BASE_DIR in saved else [BASE_DIR, *saved]
            try:
                if path is None:
                    found = getattr(importlib.import_module(module), attribute)
                else:
                    unique = 'flowc_module_' + hashlib.sha256(
                        os.path.abspath(path).encode()).hexdigest()[:16]
                    spec = importlib.util.spec_from_file_location(unique, path)
                    assert spec is not None and spec.loader is not None
                    own = importlib.util.module_from_spec(spec)
                    sys.modules[unique] = own
                    spec.loader.exec_module(own)
                    found = getattr(own, attribute)
            except Exception as error:
                raise FunctionNotLoaded(
                    f"function '{name}' ({module}:{attribute}) could not be loaded: "
                    f'{type(error).__name__}: {error}') from None
            if not callable(found):
                raise FunctionNotLoaded(f"function '{name}': {module}:{attribute} is not callable")
            loaded[name] = found
    finally:
        sys.path[:] = saved
    installed_paths = tuple(
        os.path.join(os.path.abspath(sysconfig.get_paths()[key]), '')
        for key in ('stdlib', 'platstdlib', 'purelib', 'platlib'))
    used = {getattr(function, '__module__', None) for function in loaded.values()}
    for module_name, module_object in list(sys.modules.items()):
        path = os.path.abspath(getattr(module_object, '__file__', None) or os.sep)
        in_job = path.startswith(os.path.join(os.path.abspath(BASE_DIR), ''))
        given = (module_name in used and os.path.isfile(path)
                 and not path.startswith(installed_paths))
        if (in_job or given) and not module_name.startswith(('pyspark', 'py4j')):
            cloudpickle.register_pickle_by_value(module_object)  # type: ignore[no-untyped-call]
            own_name = module_name.startswith('flowc_module_')
            if INSTALLED_FIRST and in_job and module_name not in before and not own_name:
                del sys.modules[module_name]  # pickled by value; no later import finds it
    return loaded


def register_functions(spark: SparkSession) -> None:
    """Register one Spark UDF per call of a Python function (CALLS), under the name the
    query's SQL calls it by, so a failure names the .flow line of its call."""
    loaded = load_functions()
    for registered, name, site in CALLS:
        _, _, returns, arrow, kind = FUNCTIONS[name]
        wrapped = python_function(loaded[name], name, site, returns, kind)
        spark.udf.register(registered, F.udf(wrapped, returns, useArrow=arrow))


def python_function(
    function: Callable[..., object], name: str, site: str, returns: str, kind: str
) -> Callable[..., object]:
    """``function`` as Spark calls it: what it raises, and a value that is not of its
    declared type (which PySpark would write as NULL without a word), become an error
    naming the function and the call's place in the .flow file."""
    def call(*args: object) -> object:
        try:
            value = function(*args)
        except Exception as error:
            import traceback

            frame = traceback.extract_tb(error.__traceback__)[-1]
            where = f'{os.path.basename(frame.filename)}, line {frame.lineno}, in {frame.name}'
            raise RuntimeError(
                f"[FLOWC_FUNCTION_FAILED] {site}: function '{name}' raised "
                f'{type(error).__name__}: {error} ({where})') from None
        try:
            return checked_value(value, kind)
        except (TypeError, ValueError, ArithmeticError) as error:
            raise RuntimeError(
                f"[FLOWC_FUNCTION_FAILED] {site}: function '{name}' returned "
                f'{type(value).__name__} {value!r:.60} for {returns}: {error}') from None
    return call


def checked_value(value: object, kind: str) -> object:
    """``value`` as the declared type ``kind`` wants it (an int for a DOUBLE becomes a
    float); TypeError or ValueError when it is not one."""
    import datetime
    import decimal

    if value is None:
        return None
    head, _, rest = kind.partition(':')
    if head == 'bool' and isinstance(value, bool):
        return value
    if head.startswith('int') and isinstance(value, int) and not isinstance(value, bool):
        bits = int(head[3:])
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise ValueError(f'out of range of a {bits}-bit integer')
        return value
    if head == 'float' and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if head == 'str' and isinstance(value, str):
        return value
    if head == 'bytes' and isinstance(value, bytes | bytearray):
        return bytes(value)
    if head == 'timestamp' and isinstance(value, datetime.datetime):
        return value
    if head == 'date' and isinstance(value, datetime.date):
        if isinstance(value, datetime.datetime):
            raise TypeError('a datetime where a DATE is declared')
        return value
    if head == 'decimal' and isinstance(value, decimal.Decimal | int) and not isinstance(
            value, bool):
        precision, scale = (int(part) for part in rest.split(':'))
        number = decimal.Decimal(value)
        exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
        if exact != number or len(exact.as_tuple().digits) > precision:
            raise ValueError(f'does not fit DECIMAL({precision}, {scale})')
        return exact
    if head == 'array' and isinstance(value, list | tuple):
        return [checked_value(element, rest) for element in value]
    if head == 'map' and isinstance(value, dict):
        parts = rest.split(':')
        width = 3 if parts[0] == 'decimal' else 1
        key_kind, value_kind = ':'.join(parts[:width]), ':'.join(parts[width:])
        return {checked_value(k, key_kind): checked_value(v, value_kind) for k, v in value.items()}
    raise TypeError(f'not a {kind} value')


# ---------------------------------------------------------------- upsert sinks


def query_identity(checkpoint: str | None) -> str:
    """The id Spark keeps for a query in its checkpoint (a new one after the checkpoint
    is deleted): with the batch id, what a sink remembers having written. A batch job
    (no checkpoint) is a new writer each run: a fresh id."""
    import json

    if checkpoint is None:
        import uuid

        return str(uuid.uuid4())
    with open(os.path.join(checkpoint, 'metadata'), encoding='utf-8') as handle:
        return str(json.loads(handle.readline())['id'])


def distinct_keys(rows: list[tuple[object, ...]], key_positions: list[int], sink: str,
                  batch_id: int) -> None:
    """Fail when two rows of one micro-batch have one key: the key does not identify a
    row of the results, and keeping either would be a guess."""
    seen = set()
    for row in rows:
        key = tuple(row[i] for i in key_positions)
        if key in seen:
            raise RuntimeError(
                f"[FLOWC_SINK_FAILED] sink '{sink}': two rows of micro-batch {batch_id} have "
                f'the key {key!r}: the key does not identify a row of the results')
        seen.add(key)


def upserts_win(rows: list[tuple[Any, ...]], key_positions: list[int]) -> list[tuple[Any, ...]]:
    """A processor's changelog of one micro-batch (each row's kind last, '-U' rows gone)
    without the '-D' rows of a key that a '+I' or '+U' row of the batch upserts: a TOP
    over a CDC source's changes emits a row that moved to another partition (a customer
    changing country) as '-D' from the old one's processor and '+I' from the new one's,
    in no order, and the row is there after the batch."""
    upserted = {tuple(row[i] for i in key_positions) for row in rows if row[-1] != '-D'}
    return [row for row in rows
            if row[-1] != '-D' or tuple(row[i] for i in key_positions) not in upserted]


def changes_in_order(rows: list[tuple[Any, ...]], key_positions: list[int],
                     before_deletes: bool) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A CDC source's changes of one micro-batch (each row's kind last) applied in the
    order Spark hands them over, which keeps each file's order: '+I' and '+U' upsert the
    row, '-D' deletes its key, and so does '-U' where ``before_deletes`` (Flink passes it
    to the sink, which takes an UPDATE_BEFORE as a delete), else '-U' is skipped (Flink's
    DropUpdateBefore). A key's last change decides: the rows to upsert, the keys to
    delete (a delete of a key the table does not hold deletes nothing, as in Flink)."""
    last: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    for row in rows:
        op = row[-1]
        key = tuple(row[i] for i in key_positions)
        if op in ('+I', '+U'):
            last[key] = row[:-1]
        elif op == '-D' or (op == '-U' and before_deletes):
            last[key] = None
    upserts = [row for row in last.values() if row is not None]
    return upserts, [key for key, row in last.items() if row is None]


class TableVersionsRefused(Exception):
    """A versioned table holds two versions of a key at one time: its message says which.

    Code generation writes this class as :data:`TABLE_VERSIONS_REFUSED` says (as
    :class:`FunctionNotLoaded`)."""


def table_versions(df: DataFrame, table: str, key: list[str], since: str) -> DataFrame:
    """A versioned table's rows, each with the end of its validity: the next version's
    time of its key (NULL after the last), so that a row at time t meets the version
    with since <= t < __flowc_valid_to. Two rows of one key and one time have no order
    in files, and Flink would keep whichever came last: refused, before any query runs."""

    def column(name: str) -> Column:
        return F.col('`' + name.replace('`', '``') + '`')

    named = [column(name) for name in [*key, since]]
    known = df
    for part in named:  # a NULL key or time never matches: it cannot clash
        known = known.where(part.isNotNull())
    clash = known.groupBy(*named).count().where(F.col('count') > 1).limit(1).collect()
    if clash:
        row = clash[0]
        values = ', '.join(f'{name} = {row[i]!r}' for i, name in enumerate(key))
        raise TableVersionsRefused(
            f"table '{table}' has {row['count']} rows with {values} and {since} = "
            f'{row[len(key)]}: a key has one version at a time')
    window = Window.partitionBy(*named[:-1]).orderBy(named[-1])
    return df.withColumn('__flowc_valid_to', F.lead(named[-1]).over(window))


def postgres_upsert(sink: str, table: str, columns: list[tuple[str, str]], keys: list[str],
                    connection: dict[str, object], checkpoint: str | None,
                    groups: list[str] | None = None, changelog: bool = False,
                    in_order: bool = False,
                    before_deletes: bool = False) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of a postgres sink: each micro-batch's rows upserted by
    key (INSERT ... ON CONFLICT DO UPDATE) in one transaction with the batch id, which a
    batch replayed after a crash finds there, so it writes nothing twice. ``groups``: a
    TOP's group columns; the rows of each group the batch holds are deleted first (all
    rows for a global TOP, ``[]``), so a row that left the top goes. ``changelog``: the
    batch is Flink's changelog (column __flowc_op): '+I' and '+U' rows are upserted, a '-D'
    row's key deleted, '-U' rows ignored (taken as '-D' where ``before_deletes``, as
    :func:`file_upsert` does). ``in_order``: a CDC source's changes, many per key, applied
    in order (:func:`changes_in_order`)."""
    def write(batch: DataFrame, batch_id: int) -> None:
        import psycopg
        from psycopg import sql

        names = [name for name, _ in columns]
        ops = ['__flowc_op'] if changelog else []
        positions = [names.index(k) for k in keys]
        if in_order:
            changes = [tuple(row) for row in batch.select(*[quoted(n) for n in names], *ops)
                       .collect()]
            rows, deleted = changes_in_order(changes, positions, before_deletes)
        else:
            rows = [tuple(row) for row in batch.select(*[quoted(n) for n in names], *ops)
                    .collect() if not changelog or row['__flowc_op'] != '-U']
            if before_deletes:
                rows += [(*row[:-1], '-D') for row in batch.select(
                    *[quoted(n) for n in names], *ops).collect() if row['__flowc_op'] == '-U']
            rows = upserts_win(rows, positions) if changelog else rows
            distinct_keys(rows, positions, sink, batch_id)
            deleted = [tuple(r[i] for i in positions) for r in rows
                       if changelog and r[-1] == '-D']
            rows = [r[:len(names)] for r in rows if not changelog or r[-1] != '-D']
        target = sql.Identifier(*table.split('.'))
        column_list = sql.SQL(', ').join(sql.Identifier(n) for n in names)
        key_list = sql.SQL(', ').join(sql.Identifier(k) for k in keys)
        others = [n for n in names if n not in keys]
        on_conflict = sql.SQL('DO NOTHING') if not others else sql.SQL('DO UPDATE SET {}').format(
            sql.SQL(', ').join(sql.SQL('{0} = EXCLUDED.{0}').format(sql.Identifier(n))
                               for n in others))
        upsert = sql.SQL('INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {}').format(
            target, column_list, sql.SQL(', ').join(sql.Placeholder() * len(names)), key_list,
            on_conflict)
        create = sql.SQL('CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({}))').format(
            target, sql.SQL(', ').join(sql.SQL('{} {}').format(sql.Identifier(n), sql.SQL(t))
                                       for n, t in columns), key_list)
        identity = query_identity(checkpoint)
        try:
            with psycopg.connect(**connection, autocommit=False) as conn:  # type: ignore[arg-type]
                with conn.cursor() as cursor:
                    cursor.execute(create)
                    cursor.execute(
                        'CREATE TABLE IF NOT EXISTS flowc_sink_batches (sink_table text, '
                        'query_id text, batch_id bigint NOT NULL, '
                        'PRIMARY KEY (sink_table, query_id))')
                    conn.commit()
                    cursor.execute(
                        'SELECT batch_id FROM flowc_sink_batches WHERE sink_table = %s AND '
                        'query_id = %s FOR UPDATE', (table, identity))
                    done = cursor.fetchone()
                    if done is not None and done[0] >= batch_id:
                        conn.rollback()  # a replay of a batch this table holds already
                        return
                    if groups is not None and rows:
                        where = [names.index(g) for g in groups]
                        if where:
                            delete = sql.SQL('DELETE FROM {} WHERE {}').format(
                                target, sql.SQL(' AND ').join(
                                    sql.SQL('{} IS NOT DISTINCT FROM {}').format(
                                        sql.Identifier(g), sql.Placeholder()) for g in groups))
                            cursor.executemany(
                                delete, sorted({tuple(r[i] for i in where) for r in rows},
                                               key=repr))
                        else:
                            cursor.execute(sql.SQL('DELETE FROM {}').format(target))
                    if deleted:
                        cursor.executemany(
                            sql.SQL('DELETE FROM {} WHERE {}').format(
                                target, sql.SQL(' AND ').join(
                                    sql.SQL('{} = {}').format(sql.Identifier(k),
                                                              sql.Placeholder())
                                    for k in keys)), deleted)
                    if rows:
                        cursor.executemany(upsert, rows)
                    cursor.execute(
                        'INSERT INTO flowc_sink_batches VALUES (%s, %s, %s) ON CONFLICT '
                        '(sink_table, query_id) DO UPDATE SET batch_id = EXCLUDED.batch_id',
                        (table, identity, batch_id))
                conn.commit()
        except psycopg.Error as error:
            message = ' '.join(str(error).split())
            raise RuntimeError(
                f"[FLOWC_SINK_FAILED] sink '{sink}': PostgreSQL: {message}") from None
    return write


def file_upsert(sink: str, path: str, fmt: str, keys: list[str], options: dict[str, str],
                checkpoint: str | None, groups: list[str] | None = None,
                changelog: bool = False, in_order: bool = False,
                before_deletes: bool = False) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of a files sink in update mode: the table, one row per
    key, rewritten per micro-batch into a new version folder; the file _current then names
    it (replaced atomically), with the batch id and query that wrote it, so a batch replayed
    after a crash writes nothing twice. Older versions are deleted after the switch.
    ``groups``: a TOP's group columns; the old rows of each group the batch holds are
    replaced, not only those of its keys (all of them for a global TOP, ``[]``).
    ``changelog``: the batch is Flink's changelog (column __flowc_op): '+I' and '+U' rows
    are upserted, a '-D' row's key deleted, '-U' rows ignored, or taken as '-D' where
    ``before_deletes`` (a WHERE after the processor: a key has one change a micro-batch,
    so its upsert wins). ``in_order``: a CDC source's changes, many per key, applied in
    order (:func:`changes_in_order`)."""
    def write(batch: DataFrame, batch_id: int) -> None:
        import json
        import shutil

        spark = batch.sparkSession
        identity = query_identity(checkpoint)
        # Read first, replayed or not: Spark checks that every stateful operator of the
        # micro-batch ran. Persisted: read twice, its keys and then the rows written.
        persisted = batch = batch.persist()
        written = batch
        if in_order:
            names = [c for c in batch.columns if c != '__flowc_op']
            values = batch.select(*[quoted(n) for n in names])
            changes = [tuple(row) for row in batch.select(*[quoted(n) for n in names],
                                                          '__flowc_op').collect()]
            upserts, deleted = changes_in_order(changes, [names.index(k) for k in keys],
                                                before_deletes)
            written = spark.createDataFrame(upserts, values.schema)
            rows = [tuple(r[names.index(k)] for k in keys) for r in upserts] + deleted
            batch = spark.createDataFrame(rows, values.select(*[quoted(k) for k in keys]).schema)
        elif changelog:
            if before_deletes:
                batch = batch.withColumn('__flowc_op', F.when(
                    F.col('__flowc_op') == '-U', F.lit('-D')).otherwise(F.col('__flowc_op')))
            batch = batch.where(F.col('__flowc_op') != '-U')
            written = batch.where(F.col('__flowc_op') != '-D').drop('__flowc_op')
            key_columns = batch.select(*[quoted(k) for k in keys])
            changes = [tuple(row) for row in batch.select(*[quoted(k) for k in keys],
                                                          '__flowc_op').collect()]
            rows = [row[:-1] for row in upserts_win(changes, list(range(len(keys))))]
            batch = spark.createDataFrame(rows, key_columns.schema)
        else:
            rows = [tuple(row) for row in batch.select(*[quoted(k) for k in keys]).collect()]
        pointer = os.path.join(path, '_current')
        current = None
        if os.path.exists(pointer):
            with open(pointer, encoding='utf-8') as handle:
                current = json.load(handle)
            if current['query'] == identity and current['batch_id'] >= batch_id:
                persisted.unpersist()
                return  # a replay of a batch the table holds already
        distinct_keys(rows, list(range(len(keys))), sink, batch_id)
        merged = written
        if current is not None:
            old = spark.read.format(fmt).options(**options).schema(written.schema).load(
                os.path.join(path, current['version']))
            by = keys if groups is None else groups
            if by:
                changed = batch.select(*[F.col(quoted(k)).alias(f'__flowc_key_{i}')
                                         for i, k in enumerate(by)]).distinct()
                same = [old[quoted(k)].eqNullSafe(changed[f'__flowc_key_{i}'])
                        for i, k in enumerate(by)]
                merged = old.join(changed, same, 'left_anti').unionByName(written)
            elif rows:  # a global TOP's batch is its whole result
                merged = written
            else:
                merged = old
        version = f'v-{identity[:8]}-{batch_id:020d}'
        merged.write.format(fmt).options(**options).mode('overwrite').save(
            os.path.join(path, version))
        temporary = pointer + '.tmp'
        with open(temporary, 'w', encoding='utf-8') as handle:
            json.dump({'version': version, 'query': identity, 'batch_id': batch_id}, handle)
        os.replace(temporary, pointer)
        persisted.unpersist()
        for entry in os.listdir(path):
            if entry.startswith('v-') and entry != version:
                shutil.rmtree(os.path.join(path, entry), ignore_errors=True)
    return write


class WatermarkReader(StatefulProcessor):
    """Flink's CURRENT_WATERMARK for a WHERE or SELECT: each row with the micro-batch's
    event-time watermark (NULL while Spark's is 0, before any), the last column. ``on_time``: the
    WHERE keeps only rows ahead of it ('ahead', or 'ahead_or_none' when a NULL one keeps
    all), so the rows it would drop are dropped here and the time column, the output's
    event time, keeps the watermark; None passes every row on. No state is kept."""

    def __init__(self, column: str, on_time: str | None) -> None:
        self.column = column
        self.on_time = on_time

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        from datetime import UTC, datetime, timedelta

        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        mark_ms = timerValues.getCurrentWatermarkInMs()
        mark = epoch + timedelta(milliseconds=mark_ms) if mark_ms > 0 else None
        output = None
        for row in rows:
            if output is None:
                names = list(row.__fields__)
                output = Row(*names[:-1], WATERMARK_COLUMN)
                time = names.index(self.column)
            values = tuple(row)
            if self.on_time is not None:
                at = values[time]
                if isinstance(at, datetime) and at.tzinfo is None:
                    at = at.replace(tzinfo=UTC)
                ahead = at is not None and mark is not None and at > mark
                if not (ahead or (mark is None and self.on_time == 'ahead_or_none')):
                    continue
            yield output(*values[:-1], mark)

    def close(self) -> None:
        pass


def read_watermark(df: DataFrame, column: str, on_time: str | None, buckets: int) -> DataFrame:
    """``df`` with each row's micro-batch watermark in WATERMARK_COLUMN (a TIMESTAMP),
    through a WatermarkReader (rows grouped by a hash of the row into ``buckets`` groups:
    Spark hashes no MAP, so those columns are left out of it).
    Every column's watermark is taken off first: Spark would drop the rows behind the
    previous batch's watermark before the processor, and Flink passes them to the WHERE."""
    fields = df.schema.fields
    columns = [F.col('`' + f.name.replace('`', '``') + '`') for f in fields]
    hashable = ['map<' not in f.dataType.simpleString() for f in fields]
    hashed = [c for c, ok in zip(columns, hashable, strict=True) if ok]
    bucket = F.pmod(F.hash(*hashed, F.lit(0)), F.lit(buckets)).alias(BUCKET_COLUMN)
    bare = [c.alias(f.name, metadata={}) for c, f in zip(columns, fields, strict=True)]
    plain = df.select(*bare, bucket)
    schema = StructType(
        [StructField(f.name, f.dataType, f.nullable) for f in fields]
        + [StructField(WATERMARK_COLUMN, TimestampType(), True)]
    )
    return plain.groupBy(BUCKET_COLUMN).transformWithState(
        WatermarkReader(column, on_time), schema, 'Append', 'EventTime',
        eventTimeColumnName=column if on_time is not None else '',
    )


class DeduplicateWithin(StatefulProcessor):
    """DEDUPLICATE ... WITHIN, per key: a row less than ``within`` ms (by event time, the
    epoch milliseconds in column ``millis``) from the key's kept row is dropped; the first
    row, and one ``within`` or more from the kept row, is kept and becomes the kept row; a
    micro-batch's rows in event-time order, a row without a time dropped. Rows come grouped
    by key group (column ``group``: a hash of the ON columns ``keys``), Flink's unit of keyed
    state: a group's state is one list of (the key as text, kept time), read and written once a
    micro-batch (a state call per key made 100,000 keys 20 times slower), its entries
    dropped once the watermark passes their time plus ``within`` (every later row of the
    key is then kept anyway) on input and by an event-time timer at the earliest such time.
    Spark has dropped the late rows before. Batch (``streaming`` False): no state."""

    def __init__(
        self, keys: list[str], millis: str, group: str, within: int, state: StructType | None
    ) -> None:
        self.keys = keys
        self.millis = millis
        self.group = group
        self.within = within
        self.state = state

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        if self.state is not None:
            self.kept = handle.getListState('kept', self.state)

    @staticmethod
    def identity(value: object) -> object:
        """A value equal where Spark's grouping is: NaN equals NaN and -0.0 0.0, a
        timestamp its instant (Spark hands the input's with the session's zone, state's
        without), arrays and structs by their items."""
        from datetime import UTC, datetime

        if isinstance(value, float):
            return 'NaN' if value != value else value + 0.0
        if isinstance(value, datetime):
            aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            return ('instant', aware.timestamp())
        if isinstance(value, list | tuple):
            return tuple(DeduplicateWithin.identity(v) for v in value)
        return value

    def load(self, mark: int) -> dict[str, int]:
        """The group's kept keys (their identities' text) not yet forgotten at ``mark``."""
        kept: dict[str, int] = {}
        if self.state is not None:
            for text, at in self.kept.get():
                if at + self.within > mark:
                    kept[text] = at
        return kept

    def store(self, kept: dict[str, int]) -> None:
        """The group's list, and its one timer at the earliest time a key is forgotten."""
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        if not kept:
            self.kept.clear()
            return
        self.kept.put(list(kept.items()))
        self.handle.registerTimer(min(kept.values()) + self.within)

    #: Key values whose identity is the value itself and whose text one equal value shares.
    PLAIN = (int, str, bool, type(None))

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        mark = timerValues.getCurrentWatermarkInMs() if self.state is not None else 0
        kept = self.load(mark)
        first = next(rows, None)
        if first is not None:
            yield from self.kept_rows(kept, first, rows)
        if self.state is not None:
            self.store(kept)

    def kept_rows(self, kept: dict[str, int], first: Row, rows: Iterator[Row]) -> Iterator[Row]:
        """The rows kept of ``first`` and ``rows``, ``kept`` updated. Rows are read by
        position and a key's text is made once per micro-batch when its values are plain
        (Spark hands each Python worker's rows as Row objects, so what is spent per row
        here adds to what Spark spends)."""
        from operator import itemgetter

        names = list(first.__fields__)
        at_position = names.index(self.millis)
        outputs = [i for i, n in enumerate(names) if n not in (self.millis, self.group)]
        output = Row(*[names[i] for i in outputs])
        values_of = itemgetter(*outputs)
        key_of = itemgetter(*[names.index(k) for k in self.keys])
        single = len(self.keys) == 1
        plain = self.PLAIN
        texts: dict[tuple[object, ...], str] = {}
        timed = [row for row in (first, *rows) if row[at_position] is not None]
        timed.sort(key=itemgetter(at_position))
        within = self.within
        for row in timed:
            raw = key_of(row)
            values = (raw,) if single else raw
            text = texts.get(values) if all(type(v) in plain for v in values) else None
            if text is None:
                text = repr(self.identity(values))
                if all(type(v) in plain for v in values):
                    texts[values] = text
            at = row[at_position]
            before = kept.get(text)
            if before is not None and abs(at - before) < within:
                continue
            kept[text] = at
            kept_values = values_of(row)
            yield output(*kept_values) if len(outputs) > 1 else output(kept_values)

    def handleExpiredTimer(
        self, key: tuple[object, ...], timerValues: TimerValues, expiredTimerInfo: object
    ) -> Iterator[Row]:
        self.store(self.load(timerValues.getCurrentWatermarkInMs()))
        yield from ()

    def close(self) -> None:
        pass


class DeduplicateWithinPandas(DeduplicateWithin):
    """DeduplicateWithin in the pandas form (``transformWithStateInPandas``), for inputs
    whose every column PySpark's pandas conversion carries exactly (the plan's
    ``within_form``): the same rule and the same state (a key's text is the row form's),
    each key group's rows as DataFrames, their columns ``inputs`` by position. Spark runs
    it with ``preferIntExtensionDtype``, so a BIGINT arrives as a Python int, never a float (one
    that did fails the micro-batch); a TIMESTAMP column arrives as a local wall time that
    a daylight-saving overlap makes ambiguous, so it is written back from its epoch
    microseconds (column ``micros[name]``, made before) as a UTC instant."""

    def __init__(
        self, keys: list[str], millis: str, group: str, within: int, state: StructType | None,
        inputs: list[str], output: list[str], micros: dict[str, str], integers: list[str],
    ) -> None:
        super().__init__(keys, millis, group, within, state)
        self.inputs = inputs
        self.output = output
        self.micros = micros
        self.integers = integers

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd

        mark = timerValues.getCurrentWatermarkInMs() if self.state is not None else 0
        kept = self.load(mark)
        frame = pd.concat(list(rows), ignore_index=True)
        frame.columns = self.inputs  # the worker's names are a namedtuple's: _3 for __flowc_x
        for name in self.integers:
            if frame[name].dtype.kind == 'f':
                raise ValueError(f'column {name!r} arrived as {frame[name].dtype}: the pandas '
                                 'form needs preferIntExtensionDtype, set by deduplicate_within')
        frame = frame[frame[self.millis].notna()]
        frame = frame.iloc[frame[self.millis].astype('int64').argsort(kind='stable')]
        keep = self.kept_positions(kept, frame)
        if keep:
            chosen = frame.iloc[keep]
            yield pd.DataFrame({
                name: pd.to_datetime(pd.array(chosen[self.micros[name]].tolist(), dtype='Int64'),
                                     unit='us', utc=True)
                if name in self.micros
                else chosen[name].reset_index(drop=True) if chosen[name].dtype.kind in 'iub'
                else pd.Series(self.plain(chosen[name].tolist()), dtype=object)
                for name in self.output
            })
        if self.state is not None:
            self.store(kept)

    @staticmethod
    def plain(values: list[object]) -> list[object]:
        """A column's values with NULL as None: pandas hands it as NA, or as NaN where a
        column's values are all NULL or STRING (no FLOAT or DOUBLE comes here), which
        PySpark's conversion back fails on in a STRING column."""
        import pandas as pd

        return [None if v is None or v is pd.NA or v != v else v for v in values]

    def kept_positions(self, kept: dict[str, int], frame: pd.DataFrame) -> list[int]:
        """The positions in ``frame`` (its rows in time order) of the rows kept, ``kept``
        updated. A key's values are the row form's: NULL None, a TIMESTAMP its instant."""
        import pandas as pd

        columns: list[list[object]] = []
        for name in self.keys:
            if name in self.micros:
                columns.append([None if pd.isna(v) else ('instant', int(v) / 1_000_000)
                                for v in frame[self.micros[name]].tolist()])
            else:
                columns.append(self.plain(frame[name].tolist()))
        texts: dict[tuple[object, ...], str] = {}
        plain = self.PLAIN
        within = self.within
        positions = []
        times = frame[self.millis].astype('int64').tolist()
        for position, (values, at) in enumerate(zip(zip(*columns, strict=True), times,
                                                    strict=True)):
            text = texts.get(values) if all(type(v) in plain for v in values) else None
            if text is None:
                text = repr(self.identity(values))
                if all(type(v) in plain for v in values):
                    texts[values] = text
            before = kept.get(text)
            if before is not None and abs(at - before) < within:
                continue
            kept[text] = at
            positions.append(position)
        return positions

    def handleExpiredTimer(
        self, key: tuple[object, ...], timerValues: TimerValues, expiredTimerInfo: object
    ) -> Iterator[pd.DataFrame]:
        self.store(self.load(timerValues.getCurrentWatermarkInMs()))
        yield from ()


def deduplicate_within(
    df: DataFrame, keys: list[str], column: str, within: int, groups: int, streaming: bool,
    pandas: bool = False,
) -> DataFrame:
    """``df`` deduplicated ON ``keys`` WITHIN ``within`` ms of event time ``column`` by a
    DeduplicateWithin processor per key group (a hash of the ON columns, MAP ones left out
    as Spark hashes none, into ``groups`` groups), which reads the time as epoch
    milliseconds (Spark's ``unix_millis``, whatever the session's time zone). Its two
    columns are named apart from the input's. Streaming, ``column`` stays the output's
    event time. ``pandas``: the pandas form (DeduplicateWithinPandas), each TIMESTAMP
    column's epoch microseconds beside it, for an input of the types the plan found it
    exact for (checked again here: another is a bug in flowc)."""
    taken = set(df.columns)
    millis, group = '__flowc_event_ms', '__flowc_key_group'
    while millis in taken or group in taken:
        millis, group = millis + '_', group + '_'
    fields = {f.name: f for f in df.schema.fields}
    hashed = [F.col(quoted(k)) for k in keys if 'map<' not in fields[k].dataType.simpleString()]
    added = {
        millis: F.unix_millis(F.col(quoted(column))),
        group: F.pmod(F.hash(*hashed, F.lit(0)), F.lit(groups)),
    }
    micros: dict[str, str] = {}
    integers: list[str] = [millis]
    if pandas:
        exact = ('bigint', 'int', 'smallint', 'tinyint', 'boolean', 'string', 'date', 'timestamp')
        for f in df.schema.fields:
            kind = f.dataType.simpleString()
            if kind not in exact and not kind.startswith('decimal('):
                raise ValueError(f'the pandas form of DEDUPLICATE WITHIN got column {f.name!r} '
                                 f'of type {kind}, which it does not carry exactly')
            if kind in ('bigint', 'int', 'smallint', 'tinyint'):
                integers.append(f.name)
            if kind == 'timestamp':
                micros[f.name] = millis + '_us_' + str(len(micros))
                while micros[f.name] in taken:
                    micros[f.name] += '_'
                added[micros[f.name]] = F.unix_micros(F.col(quoted(f.name)))
                integers.append(micros[f.name])
    # a TIMESTAMP reaches pandas in nanoseconds (years 1677 to 2262 only): all but the
    # event time, whose watermark drops late rows before the processor, go as microseconds
    timed = df.withColumns(added).drop(*[n for n in micros if n != column])
    state = StructType(
        [StructField('key', StringType(), False), StructField('at', LongType(), False)]
    ) if streaming else None
    output = StructType([StructField(f.name, f.dataType, f.nullable) for f in df.schema.fields])
    if not pandas:
        return timed.groupBy(F.col(group)).transformWithState(
            DeduplicateWithin(keys, millis, group, within, state),
            output,
            'Append',
            'EventTime' if streaming else 'None',
            eventTimeColumnName=column if streaming else '',
        )
    df.sparkSession.conf.set('spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype',
                             'true')
    return timed.groupBy(F.col(group)).transformWithStateInPandas(
        DeduplicateWithinPandas(keys, millis, group, within, state, timed.columns, df.columns,
                                micros, integers),
        output,
        'Append',
        'EventTime' if streaming else 'None',
        eventTimeColumnName=column if streaming else '',
    )


def stored_schema(schema: StructType) -> StructType:
    """``schema`` as a state's schema: Spark encodes state rows with Avro, whose field names
    are identifiers (a column named `w0$o0` or `unit price` failed the query at its first
    micro-batch with "Illegal character in"); where one is not, every field is named by its
    position (rows are read and written by position), else the names stay (checkpoints
    written before keep their schema)."""
    names = schema.fieldNames()
    if all(n.isascii() and n.isidentifier() for n in names):
        return schema
    return StructType(
        [StructField(f'c{i}', f.dataType, f.nullable) for i, f in enumerate(schema.fields)]
    )


class OverAggregate(StatefulProcessor):
    """An OVER step's calls per PARTITION BY key (Flink's OverAggregate, event time): each
    row waits in state (list ``waiting``) until the watermark reaches its time (epoch ms in
    column ``millis``); the waiting rows the watermark reached are then emitted in time
    order (ties in arrival order), each with ``calls`` (function, argument column or None
    for ``*``) over its frame: the row and the ``preceding`` rows emitted before it
    (ROWS), or every row within ``preceding`` ms before its time and every row of its time
    (RANGE: ties get one result), or (``preceding`` -1, LAG's RANGE UNBOUNDED) the rows
    before and of its time, of which only the largest LAG offset's last rows are kept.
    List ``history`` keeps what later frames need; value
    ``last`` the last time emitted: a row at or behind it is late and dropped, as Flink's
    ``lastTriggeringTs`` drops it. An event-time timer at the earliest waiting time emits
    a key's rows when no new row of it comes."""

    def __init__(
        self, calls: list[tuple[str, str | None, str, int, object]], millis: str, group: str,
        rows: bool, preceding: int, state: StructType,
    ) -> None:
        self.calls = calls
        self.millis = millis
        self.group = group
        self.rows = rows
        self.preceding = preceding
        self.state = state
        self.kept = max((c[3] for c in calls), default=0)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.waiting = handle.getListState('waiting', stored_schema(self.state))
        self.history = handle.getListState('history', stored_schema(self.state))
        self.last = handle.getValueState('last', StructType([StructField('at', LongType())]))

    def compute(self, frame: list[tuple[object, ...]]) -> list[object]:
        """Each call over the frame's rows (tuples in the state's column order), in order:
        NULLs skipped, as Spark's aggregates skip them; an average summed as doubles."""
        names = self.state.fieldNames()
        out: list[object] = []
        for function, column, _, offset, default in self.calls:
            if function == 'lag':
                # Flink's LAG (frame RANGE UNBOUNDED): the row ``offset`` before the last
                # row of the frame; the default before the first rows and for a NULL read
                at = names.index(column or '')
                value = frame[-1 - offset][at] if len(frame) > offset else None
                out.append(default if value is None else value)
                continue
            if column is None:
                out.append(len(frame))
                continue
            at = names.index(column)
            # the column's values, of its Spark type: numbers, strings, dates or times
            values: list[Any] = [r[at] for r in frame if r[at] is not None]
            if function == 'count':
                out.append(len(values))
            elif not values:
                out.append(None)
            elif function == 'sum':
                total = values[0]
                for v in values[1:]:
                    total = total + v
                out.append(total)
            elif function == 'avg':
                total = 0.0
                for v in values:
                    total += float(v)
                out.append(total / len(values))
            elif function == 'flink_avg':
                # Flink's AVG of an INT or BIGINT: the sum in the argument's type (Java's
                # arithmetic wraps), divided by the count truncating toward zero
                bits = 32 if self.state[at].dataType.simpleString() == 'int' else 64
                wrapped = (sum(values) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
                quotient = abs(wrapped) // len(values)
                out.append(-quotient if wrapped < 0 else quotient)
            elif function == 'min':
                out.append(min(values))
            else:
                out.append(max(values))
        return out

    def emit(self, mark: int, new: list[tuple[object, ...]]) -> Iterator[Row]:
        """Takes ``new`` rows in (late ones dropped) and emits every waiting row at or
        before watermark ``mark``; stores the state and the timer."""
        names = self.state.fieldNames()
        at = names.index(self.millis)
        stored = self.last.get()
        last = None if stored is None else stored[0]
        waiting = [tuple(r) for r in self.waiting.get()]
        waiting += [r for r in new if r[at] is not None and (last is None or r[at] > last)]
        ready = sorted((r for r in waiting if r[at] <= mark), key=lambda r: r[at])
        later = [r for r in waiting if r[at] > mark]
        history = [tuple(r) for r in self.history.get()]
        output = Row(*[n for n in names if n != self.millis], *[c[2] for c in self.calls])
        index = 0
        while index < len(ready):
            time = ready[index][at]
            end = index
            while end < len(ready) and ready[end][at] == time:
                end += 1
            tied = ready[index:end]
            if self.rows:
                for row in tied:
                    frame = [*history[max(0, len(history) - self.preceding):], row]
                    if not self.preceding:
                        frame = [row]
                    history.append(row)
                    kept = [v for n, v in zip(names, row, strict=True) if n != self.millis]
                    yield output(*kept, *self.compute(frame))
                history = history[max(0, len(history) - self.preceding):] if self.preceding else []
            elif self.preceding < 0:
                history += tied
                values = self.compute(history)
                history = history[max(0, len(history) - self.kept):] if self.kept else []
                for row in tied:
                    kept = [v for n, v in zip(names, row, strict=True) if n != self.millis]
                    yield output(*kept, *values)
            else:
                history = [r for r in history if r[at] >= time - self.preceding] + tied
                values = self.compute(history)
                for row in tied:
                    kept = [v for n, v in zip(names, row, strict=True) if n != self.millis]
                    yield output(*kept, *values)
            last = time
            index = end
        self.history.clear()
        if history:
            self.history.put(history)
        self.waiting.clear()
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        if later:
            self.waiting.put(later)
            self.handle.registerTimer(min(r[at] for r in later))
        if last is not None:
            self.last.update((last,))

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        names = self.state.fieldNames()
        new = [tuple(row[n] for n in names) for row in rows]
        yield from self.emit(timerValues.getCurrentWatermarkInMs(), new)

    def handleExpiredTimer(
        self, key: tuple[object, ...], timerValues: TimerValues, expiredTimerInfo: object
    ) -> Iterator[Row]:
        yield from self.emit(timerValues.getCurrentWatermarkInMs(), [])

    def close(self) -> None:
        pass


def flink_average_over(arg: str, kind: str, over: str) -> str:
    """Flink's AVG of an INT or BIGINT ``arg`` over the window ``over``, in Spark SQL: the
    sum taken exactly (as a DECIMAL), wrapped to the argument's width as Java's sum in that
    type wraps, then Spark's ``div`` by the count (truncating toward zero, as Java's)."""
    bits = 32 if kind == 'int' else 64
    half, whole = 2 ** (bits - 1), 2 ** bits
    total = f"sum(CAST({arg} AS DECIMAL(38, 0))) OVER ({over})"
    wrapped = f"CAST(pmod({total} + {half}, {whole}) - {half} AS {kind.upper()})"
    return f"CAST({wrapped} DIV nullif(count({arg}) OVER ({over}), 0) AS {kind.upper()})"


def over_aggregate(
    df: DataFrame, keys: list[str], column: str,
    calls: list[tuple[str, str | None, str, int, object]], rows: bool, preceding: int,
    frame: str, streaming: bool,
) -> DataFrame:
    """``df`` with each OVER call (function, argument column or None, output name, LAG's
    offset and default) as a column. Streaming: an OverAggregate processor per PARTITION BY
    key (one group without),
    reading the time as epoch milliseconds; the input's watermark is taken off its
    columns, so Spark leaves the late rows to the processor (Flink's rule, not Spark's).
    Batch: Spark's window functions over the same frame."""
    if not streaming:
        parts = 'PARTITION BY ' + ', '.join(quoted(k) for k in keys) if keys else ''
        over = ' '.join([parts, 'ORDER BY ' + quoted(column), frame])
        types = {f.name: f.dataType for f in df.schema.fields}
        # Flink's batch LAG and LEAD (asked of Flink 2.3: row by row, unlike its streaming
        # LAG): the row ``offset`` before (after) in time order, a time's rows in the sort's
        # order (Spark's here, Flink's its own: neither fixed); the default past the first
        # (last) rows and for a NULL read. One select: one window operator, so one order
        # of a time's rows for every call.
        computed = df.withColumns({
            name: F.coalesce(
                F.expr(f"{function}({quoted(arg)}, {offset}) OVER ({parts} ORDER BY "
                       f"{quoted(column)})"),
                F.lit(default).cast(types[arg]),
            )
            for function, arg, name, offset, default in calls
            if function in ('lag', 'lead') and arg
        })
        kinds = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        return computed.withColumns({
            name: F.expr(
                flink_average_over(quoted(arg), kinds[arg], over)
                if function == 'flink_avg' and arg
                else f"{function}({quoted(arg) if arg else '*'}) OVER ({over})"
            )
            for function, arg, name, _, _ in calls if function not in ('lag', 'lead')
        }).select(*[quoted(c) for c in df.columns], *[quoted(c[2]) for c in calls])
    taken = set(df.columns)
    millis, group = '__flowc_event_ms', '__flowc_key_group'
    while millis in taken or group in taken:
        millis, group = millis + '_', group + '_'
    fields = {f.name: f for f in df.schema.fields}
    plain = df.select(*[F.col(quoted(f.name)).alias(f.name, metadata={}) for f in df.schema.fields])
    timed = plain.withColumns({
        millis: F.unix_millis(F.col(quoted(column))),
        group: F.lit(0),
    })
    state = StructType(
        [StructField(f.name, f.dataType, True) for f in df.schema.fields]
        + [StructField(millis, LongType(), True)]
    )
    integral = ('tinyint', 'smallint', 'int', 'bigint')
    results = []
    for function, arg, name, _, _ in calls:
        kind: DataType
        if function == 'lag':
            kind = fields[arg].dataType if arg else LongType()
        elif function == 'count':
            kind = LongType()
        elif function == 'avg':
            kind = DoubleType()
        elif function == 'flink_avg':
            kind = fields[arg].dataType if arg else LongType()
        elif function == 'sum':
            integer = fields[arg].dataType.simpleString() in integral if arg else True
            kind = LongType() if integer else DoubleType()
        else:
            kind = fields[arg].dataType if arg else LongType()
        results.append(StructField(name, kind, True))
    grouping = [F.col(quoted(k)) for k in keys] or [F.col(group)]
    # a LAG default as a value of the argument's type (an integer default of a DOUBLE)
    typed = [
        (f, a, n, o, float(d) if k.dataType.simpleString() in ('double', 'float')
         and isinstance(d, int) else d)
        for (f, a, n, o, d), k in zip(calls, results, strict=True)
    ]
    return timed.groupBy(*grouping).transformWithState(
        OverAggregate(
            typed, millis, group, rows, preceding,
            StructType([s for s in state.fields if s.name != group]),
        ),
        StructType(
            [StructField(f.name, f.dataType, f.nullable) for f in df.schema.fields] + results
        ),
        'Append',
        'EventTime',
    )

def spark_order(value: object) -> Any:
    """A sort key ordering values as Spark orders them: NULL lowest, NaN highest, structs
    (the processors' rows hand them as dicts) and arrays field by field."""
    if value is None:
        return (0,)
    if isinstance(value, float) and value != value:
        return (2,)
    if isinstance(value, dict):
        return (1, tuple(spark_order(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return (1, tuple(spark_order(v) for v in value))
    return (1, value)


class RowtimeFirstRow(StatefulProcessor):
    """Flink's keep-first row by event time (a TOP 1 whose first BY is a rowtime attribute
    ascending: RowTimeDeduplicateKeepFirstRowFunction) per group: a row whose time (epoch
    ms in column ``millis``) is behind the micro-batch's watermark is late and dropped
    (Flink's ``rowtime < currentWatermark``); otherwise it becomes the group's candidate
    where it comes first in the order (its time, then ``order``), a candidate kept from an
    earlier micro-batch winning ties (Flink replaces it only by a strictly earlier time).
    The candidate is emitted once the watermark reaches its time (an event-time timer at
    it, as Flink's), then the group is done and every later row of it ignored. State: the
    candidate (pickled) and whether the group is done."""

    def __init__(self, columns: list[str], millis: str, order: str, rank: bool) -> None:
        self.columns = columns
        self.millis = millis
        self.order = order
        self.rank = rank

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.best = handle.getValueState('best', StructType(
            [StructField('row', BinaryType(), False), StructField('at', LongType(), False)]))
        self.done = handle.getValueState(
            'done', StructType([StructField('done', LongType(), False)]))

    ordered = staticmethod(spark_order)

    def emitted(self, mark: int) -> Iterator[Row]:
        """The candidate, once the watermark ``mark`` reached its time; the group done."""
        import pickle

        stored = self.best.get()
        if stored is None or stored[1] > mark:
            return
        values = pickle.loads(stored[0])
        self.best.clear()
        self.done.update((1,))
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        output = Row(*self.columns, *(['__flowc_rank'] if self.rank else []))
        yield output(*values, *([1] if self.rank else []))

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        import pickle

        mark = timerValues.getCurrentWatermarkInMs()
        if self.done.get() is not None:
            return
        best: tuple[tuple[int, Any], Row] | None = None
        for row in rows:
            at = row[self.millis]
            if at is None or at < mark:
                continue  # late (or no time, which Flink's watermark assigner refuses)
            rank = (at, self.ordered(row[self.order]))
            if best is None or rank < best[0]:
                best = (rank, row)
        if best is not None:
            stored = self.best.get()
            at = best[0][0]
            if stored is None or at < stored[1]:
                self.best.update((pickle.dumps([best[1][c] for c in self.columns]), at))
                for timer in list(self.handle.listTimers()):
                    self.handle.deleteTimer(timer)
                self.handle.registerTimer(at)
        yield from self.emitted(mark)

    def handleExpiredTimer(
        self, key: tuple[object, ...], timerValues: TimerValues, expiredTimerInfo: object
    ) -> Iterator[Row]:
        yield from self.emitted(timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass


def rowtime_first_row(
    df: DataFrame, keys: list[str], column: str, order: Column, rank: str | None,
) -> DataFrame:
    """``df``'s first row per ``keys`` (one group without) by event time ``column``, then
    ``order``, as Flink's keep-first row by event time: a RowtimeFirstRow processor per
    key. The input's watermark is taken off its columns, so Spark leaves the late rows to
    the processor (Flink's rule: behind the watermark, not at it)."""
    taken = set(df.columns)
    millis, group, ordering = '__flowc_event_ms', '__flowc_key_group', '__flowc_order'
    while millis in taken or group in taken or ordering in taken:
        millis, group, ordering = millis + '_', group + '_', ordering + '_'
    fields = df.schema.fields
    plain = df.select(*[F.col(quoted(f.name)).alias(f.name, metadata={}) for f in fields])
    timed = plain.withColumns({
        millis: F.unix_millis(F.col(quoted(column))),
        group: F.lit(0),
        ordering: order,
    })
    grouping = [F.col(quoted(k)) for k in keys] or [F.col(group)]
    result = StructType(
        [StructField(f.name, f.dataType, True) for f in fields]
        + ([StructField('__flowc_rank', LongType(), True)] if rank is not None else []))
    out = timed.groupBy(*grouping).transformWithState(
        RowtimeFirstRow([f.name for f in fields], millis, ordering, rank is not None),
        result, 'Append', 'EventTime')
    if rank is None:
        return out
    return out.withColumnRenamed('__flowc_rank', rank)


class ChangelogOperator(StatefulProcessor):
    """A TOP (``kind`` 'top') or an AGGREGATE ('aggregate') whose output a later stateful
    step consumes as Flink's changelog: rows with their kind in column ``__flowc_op``
    ('+I', '-U', '+U', '-D'). Flink's mini-batch semantics, a micro-batch being the bundle:
    the batch's input rows of each key are folded as a signed multiset (+I/+U add a row,
    -U/-D retract one; an input without ``__flowc_op`` only adds), which no row order can
    change, then each key whose result changed emits '+I' (a new key), '-U' old and '+U'
    new (nothing when the result is unchanged, as Flink's GroupAggFunction), or '-D' (the
    key's input rows all retracted). A TOP's result is its first ``count`` rows in the
    order of column ``order`` (a struct, compared as Spark compares it), one change per
    rank (over insert-only input only those rows are kept: no retraction can bring
    another back). Rows come grouped by key group (column ``group``, a hash of ``keys``): a group's
    state is one value, its keys (as text) with what each keeps, pickled (so every value
    comes back as it went in: Spark hands a TIMESTAMP read from state back without its
    zone), read and written once a micro-batch."""

    def __init__(
        self, kind: str, keys: list[str], columns: list[str], calls: list[tuple[str, str | None]],
        count: int, descending: bool, rank: bool, order: str, group: str,
        retracting: bool = True, identities: list[str] | None = None,
    ) -> None:
        self.kind = kind
        self.identities = identities
        self.retracting = retracting
        self.keys = keys
        self.columns = columns
        self.calls = calls
        self.count = count
        self.descending = descending
        self.rank = rank
        self.order = order
        self.group = group

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(
            'keys', StructType([StructField('keys', BinaryType(), False)]))

    @staticmethod
    def identity(value: object) -> object:
        """A value equal where Spark's grouping is: NaN equals NaN and -0.0 0.0, a
        timestamp its instant, arrays and structs by their items."""
        from datetime import UTC, datetime

        if isinstance(value, float):
            return 'NaN' if value != value else value + 0.0
        if isinstance(value, datetime):
            aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            return ('instant', aware.timestamp())
        if isinstance(value, dict):  # a struct (or a MAP) as the processor's rows hand it
            return tuple((k, ChangelogOperator.identity(v)) for k, v in value.items())
        if isinstance(value, list | tuple):
            return tuple(ChangelogOperator.identity(v) for v in value)
        return value

    ordered = staticmethod(spark_order)

    def fold(self, entry: dict[str, Any] | None, changes: list[tuple[int, tuple[Any, ...]]]
             ) -> dict[str, Any]:
        """The key's state after ``changes`` (sign, row): the rows (a TOP's, with their
        count) or the accumulators (an AGGREGATE's: its input row count, then per call a
        count, a [sum, count] or a value -> [value, count] map for MIN and MAX)."""
        if entry is None:
            entry = {'rows': {}, 'count': 0, 'accumulators': [
                {} if function in ('min', 'max') else [0, 0] if function in ('sum', 'avg')
                else 0 for function, _ in self.calls], 'out': []}
        if self.kind == 'top':
            rows = entry['rows']
            for sign, row in changes:
                text = repr(self.identity(row))
                held = rows.get(text)
                rows[text] = [row, (held[1] if held else 0) + sign]
            entry['rows'] = {k: v for k, v in rows.items() if v[1] > 0}
            if not self.retracting:  # insert-only input: a row past the first n never returns
                kept: dict[str, list[Any]] = {}
                room = self.count
                for text, held in sorted(entry['rows'].items(),
                                         key=lambda item: self.ordered(item[1][0][-1]),
                                         reverse=self.descending):
                    if room <= 0:
                        break
                    kept[text] = [held[0], min(held[1], room)]
                    room -= kept[text][1]
                entry['rows'] = kept
            return entry
        positions = {name: i for i, name in enumerate(self.columns)}
        accumulators = entry['accumulators']
        for sign, row in changes:
            entry['count'] += sign
            for i, (function, column) in enumerate(self.calls):
                value = None if column is None else row[positions[column]]
                if column is not None and value is None:
                    continue
                if function == 'count':
                    accumulators[i] += sign
                elif function in ('sum', 'avg') and value is not None:
                    accumulators[i] = [accumulators[i][0] + sign * value, accumulators[i][1] + sign]
                else:
                    text = repr(self.identity(value))
                    held = accumulators[i].get(text)
                    total = (held[1] if held else 0) + sign
                    if total > 0:
                        accumulators[i][text] = [value, total]
                    else:
                        accumulators[i].pop(text, None)
        return entry

    def result(self, key: tuple[Any, ...], entry: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The key's output rows now: a TOP's first rows (with their rank when asked), an
        AGGREGATE's one row (the keys, then each call); none once its input is empty."""
        if self.kind == 'top':
            held = sorted(entry['rows'].values(), key=lambda r: self.ordered(r[0][-1]),
                          reverse=self.descending)
            rows = [row[:-1] for row, times in held for _ in range(times)][:self.count]
            if self.rank:
                return [(*row, i + 1) for i, row in enumerate(rows)]
            return rows
        if entry['count'] <= 0:
            return []
        values: list[Any] = []
        for (function, _), accumulator in zip(self.calls, entry['accumulators'], strict=True):
            if function == 'count':
                values.append(accumulator)
            elif function in ('sum', 'avg'):
                total, seen = accumulator
                values.append(None if seen <= 0 else total if function == 'sum'
                              else total / seen)
            else:
                held = [v for v, _ in accumulator.values()]
                values.append(None if not held else min(held) if function == 'min'
                              else max(held))
        return [(*key, *values)]

    @staticmethod
    def changes(old: list[tuple[Any, ...]], new: list[tuple[Any, ...]]
                ) -> list[tuple[str, tuple[Any, ...]]]:
        """What a key emits when its rows go from ``old`` to ``new``, rank by rank:
        '+I' a new one, '-U' and '+U' a changed one, '-D' one gone; nothing unchanged."""
        out: list[tuple[str, tuple[Any, ...]]] = []
        for i in range(max(len(old), len(new))):
            if i >= len(old):
                out.append(('+I', new[i]))
            elif i >= len(new):
                out.append(('-D', old[i]))
            elif ChangelogOperator.identity(old[i]) != ChangelogOperator.identity(new[i]):
                out += [('-U', old[i]), ('+U', new[i])]
        return out

    def keyed_changes(self, old: list[tuple[Any, ...]], new: list[tuple[Any, ...]]
                      ) -> list[tuple[str, tuple[Any, ...]]]:
        """What a TOP without its rank column emits, by the row's upsert key (its
        ``identities``, the updating input's keys, as Flink's Rank): '-D' a row that left
        the top, '+I' one that entered, '-U' and '+U' one whose values changed."""
        assert self.identities is not None
        at = [self.columns.index(k) for k in self.identities]
        before = {repr(self.identity(tuple(r[i] for i in at))): r for r in old}
        after: dict[str, tuple[Any, ...]] = {}
        for row in new:
            text = repr(self.identity(tuple(row[i] for i in at)))
            if text in after:  # a CDC source's log inserting a key it holds
                raise ValueError(
                    f"[FLOWC_TOP_KEY_TWICE] two rows of the top have the key "
                    f"({', '.join(self.identities)}) = {tuple(row[i] for i in at)!r}: an "
                    'upsert sink keeps one row per key')
            after[text] = row
        out: list[tuple[str, tuple[Any, ...]]] = []
        for text in sorted(set(before) | set(after)):
            if text not in after:
                out.append(('-D', before[text]))
            elif text not in before:
                out.append(('+I', after[text]))
            elif self.identity(before[text]) != self.identity(after[text]):
                out += [('-U', before[text]), ('+U', after[text])]
        return out

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        import pickle

        stored = self.state.get()
        held: dict[str, Any] = {} if stored is None else pickle.loads(stored[0])
        batch: dict[str, tuple[tuple[Any, ...], list[tuple[int, tuple[Any, ...]]]]] = {}
        names = [*self.columns, *([self.order] if self.kind == 'top' else [])]
        for row in rows:
            op = row['__flowc_op'] if '__flowc_op' in row.__fields__ else '+I'
            keys = tuple(row[k] for k in self.keys)
            text = repr(self.identity(keys))
            batch.setdefault(text, (keys, []))[1].append(
                (-1 if op in ('-U', '-D') else 1, tuple(row[n] for n in names)))
        if self.kind == 'top':
            output = Row(*self.columns, *(['__flowc_rank'] if self.rank else []), '__flowc_op')
        else:
            output = Row(*self.keys, *[f'__flowc_call_{i}' for i in range(len(self.calls))],
                         '__flowc_op')
        for text in sorted(batch):
            keys, changes = batch[text]
            before = held.get(text)
            old = [tuple(r) for r in before['out']] if before is not None else []
            entry = self.fold(before, changes)
            new = self.result(keys, entry)
            diff = (self.keyed_changes(old, new) if self.identities is not None
                    else self.changes(old, new))
            for op, changed in diff:
                yield output(*changed, op)
            entry['out'] = new
            if (self.kind == 'top' and not entry['rows']) or (self.kind != 'top' and not new):
                held.pop(text, None)
            else:
                held[text] = entry
        if held:
            self.state.update((pickle.dumps(held),))
        else:
            self.state.clear()

    def close(self) -> None:
        pass


def changelog_operator(
    df: DataFrame, kind: str, keys: list[str], calls: list[tuple[str, str | None, str]],
    count: int, descending: bool, rank: str | None, order: Column | None, groups: int,
    result: StructType | None, identities: list[str] | None = None,
) -> DataFrame:
    """``df`` (a changelog, or insert-only rows) through a ChangelogOperator per key group
    (a hash of ``keys``, MAP ones left out as Spark hashes none, into ``groups`` groups):
    a TOP's rows ordered by ``order``, or an AGGREGATE's ``calls`` (function, argument
    column or None for ``*``, output name) per key. ``result``: the rows' schema as
    Spark's own operator would give it (without ``__flowc_op``). ``identities``: a TOP
    without its rank column over updates emits its changes by these columns (its input's
    keys, Flink's upsert key), not rank by rank."""
    if kind == 'aggregate':  # its keys and arguments only: a JOIN's rows repeat names
        needed = dict.fromkeys(keys + [c for _, c, _ in calls if c is not None])
        df = df.select(*[F.col(quoted(c)) for c in needed],
                       *(['__flowc_op'] if '__flowc_op' in df.columns else []))
    taken = set(df.columns)
    group, ordering = '__flowc_key_group', '__flowc_order'
    while group in taken or ordering in taken:
        group, ordering = group + '_', ordering + '_'
    columns = [c for c in df.columns if c != '__flowc_op']
    fields = {f.name: f for f in df.schema.fields}
    hashed = [F.col(quoted(k)) for k in keys if 'map<' not in fields[k].dataType.simpleString()]
    extra = {group: F.pmod(F.hash(*hashed, F.lit(0)), F.lit(groups))}
    if order is not None:
        extra[ordering] = order
    keyed = df.withColumns(extra)
    operator = ChangelogOperator(
        kind, keys, columns, [(f, c) for f, c, _ in calls], count, descending,
        rank is not None, ordering, group, '__flowc_op' in df.columns, identities)
    if result is None:  # a TOP's: its input columns, then its rank
        result = StructType(
            [StructField(c, fields[c].dataType, True) for c in columns]
            + ([StructField(rank, LongType(), True)] if rank is not None else []))
    if kind == 'top':
        named = [StructField(f.name, f.dataType, True) for f in result.fields]
        internal = StructType(
            [StructField('__flowc_rank' if rank is not None and f.name == rank else f.name,
                         f.dataType, True) for f in result.fields]
            + [StructField('__flowc_op', StringType(), False)])
    else:
        named = [StructField(f.name, f.dataType, True) for f in result.fields]
        internal = StructType(
            [StructField(f.name if i < len(keys) else f'__flowc_call_{i - len(keys)}',
                         f.dataType, True) for i, f in enumerate(result.fields)]
            + [StructField('__flowc_op', StringType(), False)])
    out = keyed.groupBy(F.col(group)).transformWithState(operator, internal, 'Append', 'None')
    return out.select(*[F.col(quoted(i.name)).alias(n.name)
                        for i, n in zip(internal.fields, named, strict=False)], '__flowc_op')



class ChangelogJoin(StatefulProcessor):
    """A JOIN of two sources' changes (side 0 the stream's, side 1 the other's; an
    insert-only side's rows all +I), inner or outer, Flink's regular join over updates,
    with Flink's mini-batch semantics, a micro-batch being the bundle: the batch's rows of
    each join key are folded into each side's multiset (+I/+U add a row, -U/-D take one
    back; a retraction of a row not held is ignored, as Flink ignores one without state),
    which no row order can change; then the key's joined rows before and after are
    compared by the sink's key (``at``, their positions in the joined row): '+I' a new
    one, '-U' and '+U' a changed one, '-D' one gone, nothing unchanged. A preserved side's
    row (``preserved``: LEFT side 0, RIGHT side 1, FULL both) without a match is one row
    padded with NULLs, which a match replaces and which comes back with the last match
    gone, as Flink's outer join retracts and re-emits it. Two joined rows with one sink key
    fail the query (an upsert sink would keep either). A row with a NULL join key meets
    nothing: a preserved side's is kept padded (all such rows of a key group in one entry,
    NULL_KEY, whose rows never match), another's is dropped. Rows come grouped by key
    group (column ``group``, a hash of the join key); a group's state is one pickled value,
    each join key with both sides' rows and counts."""

    #: The entry of the rows with a NULL join key (a repr of a join key is a tuple's).
    NULL_KEY = 'NULL'

    def __init__(self, left: list[str], right: list[str], left_keys: list[str],
                 right_keys: list[str], at: list[int], names: list[str],
                 preserved: tuple[bool, bool] = (False, False)) -> None:
        self.left = left
        self.right = right
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.at = at
        self.names = names
        self.preserved = preserved

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(
            'sides', StructType([StructField('sides', BinaryType(), False)]))

    #: A value equal where Spark's grouping is (ChangelogOperator's rule; the join is
    #: copied into a program only after it).
    identity = staticmethod(ChangelogOperator.identity)

    def joined(self, entry: dict[str, dict[str, list[Any]]],
               matching: bool = True) -> dict[str, tuple[Any, ...]]:
        """The key's joined rows (padded ones for a preserved side without a match, or for
        every preserved row where not ``matching``) by their sink key's text; two with
        one key fail."""
        lefts, rights = list(entry['left'].values()), list(entry['right'].values())
        rows: list[tuple[tuple[Any, ...], int]] = []
        if matching:
            rows += [((*left, *right), times_left * times_right)
                     for left, times_left in lefts for right, times_right in rights]
        if self.preserved[0] and not (matching and rights):
            rows += [((*left, *[None] * len(self.right)), times) for left, times in lefts]
        if self.preserved[1] and not (matching and lefts):
            rows += [((*[None] * len(self.left), *right), times) for right, times in rights]
        out: dict[str, tuple[Any, ...]] = {}
        for row, times in rows:
            text = repr(self.identity(tuple(row[i] for i in self.at)))
            if text in out or times > 1:
                keys = ', '.join(self.names[i] for i in self.at)
                raise ValueError(
                    f'[FLOWC_JOIN_KEY_TWICE] two joined rows have the sink key ({keys}) '
                    f'= {tuple(row[i] for i in self.at)!r}: an upsert sink keeps one row '
                    'per key')
            out[text] = row
        return out

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        import pickle

        stored = self.state.get()
        held: dict[str, Any] = {} if stored is None else pickle.loads(stored[0])
        batch: dict[str, list[tuple[str, int, tuple[Any, ...]]]] = {}
        for row in rows:
            index = row['__flowc_side']
            side = 'left' if index == 0 else 'right'
            names = self.left if side == 'left' else self.right
            keys = self.left_keys if side == 'left' else self.right_keys
            values = tuple(row[n] for n in names)
            joined = tuple(row[k] for k in keys)
            if any(v is None for v in joined) and not self.preserved[index]:
                continue  # NULL = anything is not true: the row meets nothing
            text = (self.NULL_KEY if any(v is None for v in joined)
                    else repr(self.identity(joined)))
            sign = -1 if row['__flowc_op'] in ('-U', '-D') else 1
            batch.setdefault(text, []).append((side, sign, values))
        output = Row(*self.names, '__flowc_op')
        for text in sorted(batch):
            matching = text != self.NULL_KEY
            entry = held.get(text) or {'left': {}, 'right': {}}
            before = self.joined(entry, matching)
            for side, sign, values in batch[text]:
                rows_of = entry[side]
                identity = repr(self.identity(values))
                had = rows_of.get(identity)
                times = (had[1] if had else 0) + sign
                if times > 0:
                    rows_of[identity] = [values, times]
                else:
                    rows_of.pop(identity, None)
            after = self.joined(entry, matching)
            for row_key in sorted(set(before) | set(after)):
                if row_key not in after:
                    yield output(*before[row_key], '-D')
                elif row_key not in before:
                    yield output(*after[row_key], '+I')
                elif self.identity(before[row_key]) != self.identity(after[row_key]):
                    yield output(*before[row_key], '-U')
                    yield output(*after[row_key], '+U')
            if entry['left'] or entry['right']:
                held[text] = entry
            else:
                held.pop(text, None)
        if held:
            self.state.update((pickle.dumps(held),))
        else:
            self.state.clear()

    def close(self) -> None:
        pass


def changelog_join(
    left: DataFrame, right: DataFrame, pairs: list[tuple[str, str]], at: list[int],
    groups: int, preserved: tuple[bool, bool] = (False, False),
) -> DataFrame:
    """The JOIN of ``left`` and ``right`` (each a changelog, column __flowc_op, or
    insert-only rows) on the ``pairs`` of equal columns, through a ChangelogJoin per key
    group: both sides in one stream, each row padded with NULLs for the other side's
    columns and tagged with its side, grouped by a hash of its join key; its output the
    joined rows (left's columns, then right's) with their change in __flowc_op. ``at``:
    the positions of the sink's key in a joined row; ``preserved``: the outer sides."""
    left_names = [c for c in left.columns if c != '__flowc_op']
    right_names = [c for c in right.columns if c != '__flowc_op']
    fields = [f for df in (left, right) for f in df.schema.fields if f.name != '__flowc_op']
    group = '__flowc_key_group'

    def padded(df: DataFrame, side: int, keys: list[str]) -> DataFrame:
        columns = [
            F.col(quoted(f.name)) if f.name in df.columns
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in fields]
        op = F.col('__flowc_op') if '__flowc_op' in df.columns else F.lit('+I')
        hashed = F.pmod(F.hash(*[F.col(quoted(k)) for k in keys], F.lit(0)), F.lit(groups))
        return df.select(*columns, F.lit(side).alias('__flowc_side'), op.alias('__flowc_op'),
                         hashed.alias(group))

    both = padded(left, 0, [a for a, _ in pairs]).unionByName(
        padded(right, 1, [b for _, b in pairs]))
    operator = ChangelogJoin(left_names, right_names, [a for a, _ in pairs],
                             [b for _, b in pairs], at, left_names + right_names, preserved)
    result = StructType([StructField(f.name, f.dataType, True) for f in fields]
                        + [StructField('__flowc_op', StringType(), False)])
    return both.groupBy(F.col(group)).transformWithState(operator, result, 'Append', 'None')


# fmt: on


#: What a program with a WHERE reading CURRENT_WATERMARK carries (after its constant).
WATERMARK_HELPERS = (WatermarkReader, read_watermark)


#: What a program with a DEDUPLICATE ... WITHIN carries (and ``quoted``).
DEDUPLICATE_WITHIN_HELPERS = (DeduplicateWithin, deduplicate_within)
#: And with one in the pandas form (before ``deduplicate_within``).
DEDUPLICATE_WITHIN_PANDAS_HELPERS = (DeduplicateWithin, DeduplicateWithinPandas, deduplicate_within)

#: What a program with an updating step consumed by another carries (and ``quoted``).
CHANGELOG_HELPERS = (spark_order, ChangelogOperator, changelog_operator)

#: What a program with a JOIN consuming a CDC source's changes carries (and ``quoted``).
CHANGELOG_JOIN_HELPERS = (ChangelogJoin, changelog_join)

#: What a program with a TOP keeping each group's first row by event time carries (and
#: ``quoted``).
ROWTIME_FIRST_HELPERS = (spark_order, RowtimeFirstRow, rowtime_first_row)

#: What a program with an OVER step carries (and ``quoted``).
OVER_HELPERS = (stored_schema, OverAggregate, flink_average_over, over_aggregate)


#: What a program with an upsert sink carries (and ``quoted``, a malformed-records helper),
#: then ``postgres_upsert`` or ``file_upsert`` for the sinks it has.
UPSERT_HELPERS = (query_identity, distinct_keys, upserts_win)


#: The generated program's FunctionNotLoaded, as text.
FUNCTION_NOT_LOADED = (
    "class FunctionNotLoaded(Exception):\n"
    '    """A Python function the job calls could not be loaded: its message says which."""'
)

#: The generated program's TableVersionsRefused, as text, and what a program with an
#: event-time temporal join carries after it.
TABLE_VERSIONS_REFUSED = (
    "class TableVersionsRefused(Exception):\n"
    '    """A versioned table holds two versions of a key at one time: its message says which."""'
)
TEMPORAL_JOIN_HELPERS = (table_versions,)

#: What a program that calls Python functions carries: their loading, one UDF per call,
#: and the check of every value they return (after FUNCTION_NOT_LOADED).
FUNCTION_HELPERS = (
    load_functions,
    register_functions,
    python_function,
    checked_value,
)


#: What every program carries to prepare the session it runs on, its own or a given one.
SESSION_HELPERS = (no_variable_substitution,)

#: What a batch program carries: the plan each write ran, to count its exchanges.
BATCH_HELPERS = (executed_plan, replace_output)

#: What every program's ``main()`` uses when Spark fails: the error class and message (and
#: the SQL that failed), without Spark's Java stack trace.
FAILURE_HELPERS = (spark_failed, stop_queries, report_failure)

#: What a program carries when a source's records can be malformed. Spark reads json and
#: csv in PERMISSIVE mode into a record column; these turn that column into a failed query
#: that names the file and line, or into the side output ``errors``.
MALFORMED_HELPERS = (
    quoted,
    every_column_read,
    malformed_reason,
    fail_on_malformed,
    malformed_records,
    well_formed_records,
    malformed_record,
    flow_name,
    first_line_of,
)

#: What a program with a debezium-json source carries besides :data:`MALFORMED_HELPERS`.
DEBEZIUM_HELPERS = (debezium_changes, fail_on_bad_change, bad_changes, good_changes)

#: The constants :data:`MALFORMED_HELPERS` read, as the program defines them.
MALFORMED_CONSTANTS = {"MALFORMED": MALFORMED, "FIELD_SEPARATOR": FIELD_SEPARATOR, "END": END}
