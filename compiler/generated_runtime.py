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
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from pyspark.errors import PySparkException
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import functions as F

#: The generated program defines its own after these functions: its json and csv sources'
#: names, in declaration order (:func:`malformed_record` reports a failure by the index).
PARSED_SOURCES: list[str] = []

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
# fmt: on


#: What a batch program carries: the plan each write ran, to count its exchanges.
BATCH_HELPERS = (executed_plan,)

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

#: The constants :data:`MALFORMED_HELPERS` read, as the program defines them.
MALFORMED_CONSTANTS = {"MALFORMED": MALFORMED, "FIELD_SEPARATOR": FIELD_SEPARATOR, "END": END}
