"""What the language knows by name: settings, operator hints and connectors with their options.

Each entry says how to read a value (:class:`ValueKind`) so the checker can report the
key's position, the expected type and the accepted range in one place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import field

from sqlglot.dialects.dialect import Dialect

from flowc.ast import Value
from flowc.fast_dataclass import dataclass
from flowc.flink.keygroups import UPPER_BOUND_MAX_PARALLELISM
from flowc.vocabulary import LiteralKind


class OptionValueError(Exception):
    """A value that does not fit its key; the message says what was expected."""


@dataclass(frozen=True, slots=True)
class ValueKind:
    """How to read and check a value: ``parse`` returns the Python value or raises
    :class:`OptionValueError`."""

    description: str
    parse: Callable[[Value], object]


#: A number written as a string, as Flink's options are all written (``'rows' = '10'``)
#: and as Spark's DataStreamReader options are all passed.
_QUOTED_INTEGER = re.compile(r"[+-]?[0-9]+")
_QUOTED_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _numeric(value: Value) -> object:
    """The number ``value`` is: a number, or a string holding only one."""
    if value.kind != LiteralKind.STRING:
        return value.python
    text = str(value.python).strip()
    if _QUOTED_INTEGER.fullmatch(text):
        return int(text)
    if _QUOTED_NUMBER.fullmatch(text):
        return float(text)
    return text


def _integer(low: int, high: int | None = None) -> ValueKind:
    def parse(value: Value) -> object:
        number = _numeric(value)
        if (
            value.kind not in (LiteralKind.NUMBER, LiteralKind.STRING)
            or not isinstance(number, int)
            or isinstance(number, bool)
        ):
            raise OptionValueError(f"expected a whole number, found {value.text}")
        if number < low or (high is not None and number > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise OptionValueError(f"must be {bounds}, found {number}")
        return number

    desc = f"a whole number {low}..{high}" if high is not None else f"a whole number >= {low}"
    return ValueKind(desc, parse)


def _number(positive: bool = False) -> ValueKind:
    def parse(value: Value) -> object:
        number = _numeric(value)
        if value.kind not in (LiteralKind.NUMBER, LiteralKind.STRING) or not isinstance(
            number, int | float
        ):
            raise OptionValueError(f"expected a number, found {value.text}")
        if not math.isfinite(number):
            raise OptionValueError(f"must be a finite number, found {value.text}")
        if positive and number <= 0:
            raise OptionValueError(f"must be greater than 0, found {value.text}")
        return number

    return ValueKind("a positive number" if positive else "a number", parse)


def _string(non_empty: bool = True) -> ValueKind:
    def parse(value: Value) -> object:
        if value.kind != LiteralKind.STRING:
            raise OptionValueError(f"expected a quoted string, found {value.text}")
        text = str(value.python)
        if non_empty and not text:
            raise OptionValueError("must not be empty")
        return text

    return ValueKind("a quoted string", parse)


def partition_columns(text: str) -> tuple[str, ...]:
    """``'dt, hm'`` → ``("dt", "hm")``; a ValueError names what is not a column name."""
    names = tuple(part.strip() for part in text.split(","))
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"'{name}' is not a column name")
    if len(set(names)) != len(names):
        raise ValueError("a column is named twice")
    return names


def _column_list() -> ValueKind:
    def parse(value: Value) -> object:
        text = _string().parse(value)
        try:
            partition_columns(str(text))
        except ValueError as error:
            raise OptionValueError(str(error)) from None
        return text

    return ValueKind("a quoted list of column names ('dt, hm')", parse)


def _choice(*choices: str) -> ValueKind:
    def parse(value: Value) -> object:
        if value.kind == LiteralKind.NUMBER:
            raise OptionValueError(f"expected one of {_quoted(choices)}, found {value.text}")
        text = str(value.python).lower()
        if text not in choices:
            raise OptionValueError(f"expected one of {_quoted(choices)}, found '{value.python}'")
        return text

    return ValueKind("one of " + _quoted(choices), parse)


def _boolean() -> ValueKind:
    def parse(value: Value) -> object:
        text = str(value.python).lower()
        if value.kind == LiteralKind.NUMBER or text not in ("true", "false"):
            raise OptionValueError(f"expected true or false, found {value.text}")
        return text == "true"

    return ValueKind("true or false", parse)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.I)
_UNIT_MS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}


def parse_duration_ms(text: str) -> int | None:
    """``10s``, ``500ms``, ``1min``, ``'2 hours'`` → milliseconds; None if not a duration."""
    m = _DURATION.match(text)
    if not m or m.group(2).lower() not in _UNIT_MS:
        return None
    ms = float(m.group(1)) * _UNIT_MS[m.group(2).lower()]
    return round(ms) if math.isfinite(ms) else None


def _duration() -> ValueKind:
    def parse(value: Value) -> object:
        ms = parse_duration_ms(str(value.python))
        if ms is None:
            raise OptionValueError(
                f"expected a duration such as 10s, 500ms or 1min, found {value.text}"
            )
        return ms

    return ValueKind("a duration (10s, 500ms, 1min)", parse)


def _quoted(choices: tuple[str, ...]) -> str:
    return ", ".join(f"'{c}'" for c in choices)


def _dialect() -> ValueKind:
    def parse(value: Value) -> object:
        name = str(value.python).lower()
        try:
            Dialect.get_or_raise(name)
        except ValueError as error:
            raise OptionValueError(f"unknown SQL dialect '{value.python}'") from error
        return name

    return ValueKind("a sqlglot dialect name", parse)


# ---------------------------------------------------------------- settings

#: How the Spark realization runs Flink's exchanges: ``minimal`` (the default) runs none
#: where Flink's exchange exists only because the parallelism changes and Spark needs none;
#: ``flink`` runs every exchange of Flink's graph as a shuffle.
EXCHANGE_MODES = ("minimal", "flink")

#: Flink's state backends, each run as its Spark counterpart (:mod:`flowc.analyze.state_store`).
STATE_BACKENDS = ("hashmap", "rocksdb")

SETTINGS: dict[str, ValueKind] = {
    "parallelism": _integer(1, UPPER_BOUND_MAX_PARALLELISM),
    "max_parallelism": _integer(1, UPPER_BOUND_MAX_PARALLELISM),
    "chaining": _boolean(),
    "execution.mode": _choice("streaming", "batch"),
    "batch.auto_parallelism": _boolean(),
    "checkpoint.interval": _duration(),
    "checkpoint.mode": _choice("exactly_once", "at_least_once"),
    "checkpoint.dir": _string(),
    "job.name": _string(),
    "sql.dialect": _dialect(),
    "exchanges": _choice(*EXCHANGE_MODES),
    "state.backend.type": _choice(*STATE_BACKENDS),
    "state.backend.changelog.enabled": _boolean(),
}

#: Flink's own keys for the same settings, read as flowc's (a Flink user's ``SET
#: 'parallelism.default' = '4'``): Flink 2.x's names, values as Flink writes them
#: (``BATCH``, ``EXACTLY_ONCE``; a duration with its unit).
FLINK_SETTINGS: dict[str, str] = {
    "parallelism.default": "parallelism",
    "pipeline.max-parallelism": "max_parallelism",
    "pipeline.operator-chaining.enabled": "chaining",
    "execution.runtime-mode": "execution.mode",
    "execution.batch.adaptive.auto-parallelism.enabled": "batch.auto_parallelism",
    "execution.checkpointing.interval": "checkpoint.interval",
    "execution.checkpointing.mode": "checkpoint.mode",
    "execution.checkpointing.dir": "checkpoint.dir",
    "pipeline.name": "job.name",
}

#: Settings passed through unchecked: ``spark.*`` goes to the Spark session as written.
SETTING_PREFIXES = ("spark.",)

# ---------------------------------------------------------------- operator hints

CHAINING_STRATEGIES = ("always", "new_chain", "never")

HINTS: dict[str, ValueKind] = {
    "name": _string(),
    "uid": _string(),
    "parallelism": _integer(1, UPPER_BOUND_MAX_PARALLELISM),
    "max_parallelism": _integer(1, UPPER_BOUND_MAX_PARALLELISM),
    "slot_sharing_group": _string(),
    "chaining": _choice(*CHAINING_STRATEGIES),
}

# ---------------------------------------------------------------- connectors

SINK_MODES = ("append", "update", "complete")
#: The sinks a Flink-dialect CREATE TABLE without ``mode`` gives the mode its query needs
#: (Flink's print and blackhole take any changelog). Not memory (no update mode in Spark)
#: nor files: Flink's filesystem sink takes inserts only, as flowc's does.
MODE_BY_QUERY_CONNECTORS = frozenset({"console", "noop"})

FILE_FORMATS = ("json", "csv", "parquet", "orc", "text", "debezium-json")

#: Formats whose records are changes (Flink's CDC formats): a source of one emits inserts,
#: updates (before and after) and deletes, its changelog mode ``I,UB,UA,D``.
CHANGELOG_FORMATS = ("debezium-json",)
#: The hidden column of a changelog DataFrame: each row's kind of change as Flink's RowKind
#: prints it (``+I``, ``-U``, ``+U``, ``-D``).
OP_COLUMN = "__flowc_op"
#: Sinks that take a CDC source's changes (in append mode), showing each with its kind in
#: :data:`OP_COLUMN`, as Flink's print sink shows ``+I``/``-U``/``+U``/``-D``.
CHANGE_SHOWING_SINKS = ("memory", "console")
#: Options of Flink's debezium-json format flowc takes (the envelope in a ``payload`` field)
#: and the one it refuses with a hint (dropping bad records silently).
DEBEZIUM_SCHEMA_INCLUDE = "debezium-json.schema-include"
DEBEZIUM_IGNORE_PARSE_ERRORS = "debezium-json.ignore-parse-errors"

#: What a json or csv file source does with a malformed record: fail the query (naming the
#: file and line) or route it to the source's side output ``errors``.
ON_ERROR_POLICIES = ("fail", "route")
#: Formats whose records can be malformed line by line (parquet and orc carry their schema).
PARSED_FILE_FORMATS = ("json", "csv", "debezium-json")
#: The side output of a source with ``on_error = 'route'``, and its columns.
ERRORS_OUTPUT = "errors"
ERRORS_COLUMNS = (("raw", "STRING"), ("file", "STRING"), ("error", "STRING"))
#: Options of a connector that only its source role takes.
SOURCE_ONLY_OPTIONS = frozenset(
    {
        "on_error",
        "max_files_per_trigger",
        "latest_first",
        DEBEZIUM_SCHEMA_INCLUDE,
        DEBEZIUM_IGNORE_PARSE_ERRORS,
    }
)
#: Options of a connector that only its sink role takes.
SINK_ONLY_OPTIONS = frozenset({"partition_by", "key"})
#: Formats a files sink in update mode (an upsert table, rewritten per micro-batch) writes
#: and reads back.
UPSERT_FILE_FORMATS = ("parquet", "json")

_FILE_FORMAT_OPTIONS: dict[str, ValueKind] = {
    "header": _boolean(),
    "delimiter": _string(non_empty=True),
    "quote": _string(non_empty=False),
    "escape": _string(non_empty=False),
    "encoding": _string(),
    "multiline": _boolean(),
    "compression": _string(),
    "timestamp_format": _string(),
    "date_format": _string(),
    "null_value": _string(non_empty=False),
    "comment": _string(non_empty=False),
    "line_sep": _string(),
}


def is_upsert(connector: str, mode: str) -> bool:
    """A sink that keeps one row per key: postgres, or files in update mode."""
    return connector == "postgres" or (connector == "files" and mode == "update")


@dataclass(frozen=True, slots=True)
class Connector:
    """A connector: where it may be used, its options, required ones, and sink modes."""

    name: str
    roles: frozenset[str]
    options: dict[str, ValueKind]
    required: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sink_modes: tuple[str, ...] = SINK_MODES
    option_prefixes: tuple[str, ...] = ()

    def accepts(self, key: str) -> bool:
        return key in self.options or any(key.startswith(p) for p in self.option_prefixes)


CONNECTORS: dict[str, Connector] = {
    c.name: c
    for c in (
        Connector(
            "files",
            frozenset({"source", "sink"}),
            {
                "path": _string(),
                "format": _choice(*FILE_FORMATS),
                "max_files_per_trigger": _integer(1),
                "latest_first": _boolean(),
                "on_error": _choice(*ON_ERROR_POLICIES),
                "partition_by": _column_list(),
                "key": _column_list(),
                DEBEZIUM_SCHEMA_INCLUDE: _boolean(),
                DEBEZIUM_IGNORE_PARSE_ERRORS: _boolean(),
                **_FILE_FORMAT_OPTIONS,
            },
            required={"source": ("path", "format"), "sink": ("path", "format")},
            sink_modes=("append", "update"),
        ),
        Connector(
            "postgres",
            frozenset({"sink"}),
            {
                "host": _string(),
                "port": _integer(1, 65535),
                "database": _string(),
                "user": _string(),
                "password": _string(non_empty=False),
                "password_env": _string(),
                "table": _string(),
                "key": _column_list(),
            },
            required={"sink": ("database", "table")},
            sink_modes=("update", "append"),
        ),
        Connector(
            "datagen",
            frozenset({"source"}),
            {
                "rows_per_second": _number(positive=True),
                "number_of_rows": _integer(0),
                "seed": _integer(-(2**63), 2**63 - 1),
            },
            option_prefixes=("fields.",),
        ),
        Connector(
            "rate",
            frozenset({"source"}),
            {
                "rows_per_second": _integer(1),
                "ramp_up_time": _duration(),
                "num_partitions": _integer(1),
            },
        ),
        Connector(
            "socket",
            frozenset({"source"}),
            {"host": _string(), "port": _integer(1, 65535), "include_timestamp": _boolean()},
            required={"source": ("host", "port")},
        ),
        Connector(
            "kafka",
            frozenset({"source", "sink"}),
            {
                "topic": _string(),
                "bootstrap_servers": _string(),
                "starting_offsets": _string(),
                "fail_on_data_loss": _boolean(),
                "max_offsets_per_trigger": _integer(1),
                "format": _choice("raw", "json"),
            },
            required={
                "source": ("topic", "bootstrap_servers"),
                "sink": ("topic", "bootstrap_servers"),
            },
            option_prefixes=("kafka.",),
        ),
        Connector("console", frozenset({"sink"}), {"rows": _integer(1), "truncate": _boolean()}),
        Connector("memory", frozenset({"sink"}), {}, sink_modes=("append", "complete")),
        Connector("noop", frozenset({"sink"}), {}),
    )
}

#: Options every sink takes besides its connector's own.
SINK_OPTIONS: dict[str, ValueKind] = {"mode": _choice(*SINK_MODES)}

DATAGEN_FIELD_OPTIONS: dict[str, ValueKind] = {
    "min": _number(),
    "max": _number(),
    "length": _integer(0),
    "kind": _choice("random", "sequence"),
}

#: Columns the rate and Kafka sources produce (name → accepted Spark types).
RATE_COLUMNS: dict[str, tuple[str, ...]] = {"timestamp": ("TIMESTAMP",), "value": ("BIGINT",)}
KAFKA_COLUMNS: dict[str, tuple[str, ...]] = {
    "key": ("BINARY", "STRING"),
    "value": ("BINARY", "STRING"),
    "topic": ("STRING",),
    "partition": ("INT",),
    "offset": ("BIGINT",),
    "timestamp": ("TIMESTAMP",),
    "timestamp_type": ("INT",),
}
