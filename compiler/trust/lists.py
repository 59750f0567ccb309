"""What an untrusted program may use: the ``spark.*`` settings and the shapes of their
values, the functions it may not call, the connector options and codecs it may give, the
URI schemes of its paths. Kept apart from the checks (:mod:`flowc.trust.policy`) so the lists
read as the policy they are (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from flowc.flink.keygroups import UPPER_BOUND_MAX_PARALLELISM


def _whole(low: int, high: int | None = None) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        if re.fullmatch(r"\d{1,18}", text) is None:
            return False
        return low <= int(text) and (high is None or int(text) <= high)

    return check


def _matches(pattern: str) -> Callable[[str], bool]:
    # compiled at the first check (re keeps it), not at import: only an untrusted
    # program's settings are checked, and compiling the seven took 0.7 ms of every start
    return lambda text: re.fullmatch(pattern, text, re.IGNORECASE) is not None


_BOOLEAN = ("true or false", _matches(r"true|false"))
_BYTES = ("a size such as 10485760, 64m or 128mb", _matches(r"-1|\d+(b|k|kb|m|mb|g|gb)?"))

#: The ``spark.*`` settings an untrusted program may make: tuning of SQL and streaming
#: that names no class, path, host or JVM option. Each maps to (what it takes, check).
SPARK_SETTINGS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "spark.sql.shuffle.partitions": (
        f"a whole number 1..{UPPER_BOUND_MAX_PARALLELISM}",
        _whole(1, UPPER_BOUND_MAX_PARALLELISM),
    ),
    "spark.default.parallelism": (
        f"a whole number 1..{UPPER_BOUND_MAX_PARALLELISM}",
        _whole(1, UPPER_BOUND_MAX_PARALLELISM),
    ),
    "spark.sql.session.timeZone": (
        "a time-zone id such as UTC, Europe/Paris or +02:00",
        _matches(r"[A-Za-z][A-Za-z0-9_+\-]{0,40}(/[A-Za-z0-9_+\-]{1,40}){0,2}|[+-]\d{2}:\d{2}"),
    ),
    "spark.sql.ansi.enabled": _BOOLEAN,
    "spark.sql.adaptive.enabled": _BOOLEAN,
    "spark.sql.caseSensitive": _BOOLEAN,
    "spark.sql.autoBroadcastJoinThreshold": _BYTES,
    "spark.sql.files.maxPartitionBytes": _BYTES,
    "spark.sql.files.maxRecordsPerFile": ("a whole number", _whole(0)),
    "spark.sql.jsonGenerator.ignoreNullFields": _BOOLEAN,
    "spark.sql.streaming.noDataMicroBatches.enabled": _BOOLEAN,
    "spark.sql.streaming.minBatchesToRetain": ("a whole number >= 1", _whole(1)),
    "spark.sql.streaming.multipleWatermarkPolicy": ("min or max", _matches(r"min|max")),
    "spark.sql.legacy.timeParserPolicy": (
        "EXCEPTION, CORRECTED or LEGACY",
        _matches(r"exception|corrected|legacy"),
    ),
    "spark.sql.mapKeyDedupPolicy": ("EXCEPTION or LAST_WIN", _matches(r"exception|last_win")),
    "spark.sql.timestampType": (
        "TIMESTAMP_LTZ or TIMESTAMP_NTZ",
        _matches(r"timestamp_ltz|timestamp_ntz"),
    ),
}

_JVM = "it calls any static Java method by name, so it reaches all the JVM can"
_AVRO = "its options can load an Avro schema from a file or URL (avroSchemaUrl)"
_PROTOBUF = "it reads the Protobuf descriptor file its argument names"
_USER = "it tells which account the Spark process runs as"
_XPATH = (
    "its XML parser loads the external DTD a document names (<!DOCTYPE x SYSTEM '/path'>), "
    "reading any file or URL"
)

#: Spark functions an untrusted program may not call (lower case), and why.
DENIED_FUNCTIONS: dict[str, str] = {
    "reflect": _JVM,
    "java_method": _JVM,
    "try_reflect": _JVM,
    "from_protobuf": _PROTOBUF,
    "to_protobuf": _PROTOBUF,
    "from_avro": _AVRO,
    "schema_of_avro": _AVRO,
    "current_user": _USER,
    "user": _USER,
    "session_user": _USER,
    "python_worker_logs": "it reads the logs of Spark's Python worker processes",
    "identifier": "it makes a name from a string at run time, past flowc's checks",
    **{
        name: _XPATH
        for name in (
            "xpath", "xpath_boolean", "xpath_double", "xpath_float", "xpath_int",
            "xpath_long", "xpath_number", "xpath_short", "xpath_string",
        )
    },
}  # fmt: skip

#: Functions whose options argument (at this index, from 0) can name a file or URL.
FILE_OPTION_ARGUMENTS: dict[str, int] = {"from_xml": 2, "schema_of_xml": 1}

#: ``kafka.*`` options (handed to the Kafka client as written) an untrusted program may
#: give: none names a class, a file or credentials.
KAFKA_OPTIONS = frozenset(
    {
        "kafka.client.id",
        "kafka.request.timeout.ms",
        "kafka.session.timeout.ms",
        "kafka.max.poll.records",
        "kafka.fetch.max.bytes",
        "kafka.max.partition.fetch.bytes",
        "kafka.linger.ms",
        "kafka.batch.size",
        "kafka.acks",
        "kafka.compression.type",
    }
)
#: The values an untrusted program may give an allowed ``kafka.*`` option.
KAFKA_VALUE = re.compile(r"[A-Za-z0-9_.\-]{1,100}")

#: File compression codecs by short name (Spark and Hadoop also take a codec's class name).
COMPRESSION_CODECS = frozenset(
    {"none", "uncompressed", "bzip2", "deflate", "gzip", "lz4", "lz4_raw", "lzo", "snappy",
     "zstd", "brotli", "zlib"}
)  # fmt: skip

#: URI schemes a file path may have in untrusted mode: none, only plain relative paths.
URI_SCHEMES: frozenset[str] = frozenset()

#: Entries of a source's or sink's folder looked at for symbolic links leading out.
SYMLINK_SCAN_LIMIT = 10_000

#: Spark's SQL variable substitution (``${...}`` in SQL text): flowc sets it to false on
#: every session it runs a job on.
SUBSTITUTION_KEY = "spark.sql.variable.substitute"

#: Spark functions whose arguments (by position, from 0) Java's regex engine reads.
REGEX_ARGUMENTS: dict[str, tuple[int, ...]] = {
    **{
        name: (1,)
        for name in (
            "rlike", "regexp", "regexp_like", "regexp_replace", "regexp_extract",
            "regexp_extract_all", "regexp_count", "regexp_instr", "regexp_substr", "split",
        )
    },
    "str_to_map": (1, 2),
}  # fmt: skip
