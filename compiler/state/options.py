"""What a changed option or setting means for a query's state and output.

Every option of every connector (sources, tables, sinks) and every setting has a rule
here: refused (E0820), allowed with a warning (E0825, or E0821/E0824 where the restart
guard says more), or allowed. ``tests/test_state_options.py`` checks that every option
of :data:`flowc.catalog.CONNECTORS` and every key of :data:`flowc.catalog.SETTINGS` has
one, and docs/state.md's table is :func:`option_table`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum

from flowc.fast_dataclass import dataclass
from flowc.state.findings import Finding, Verdict, ways_out
from flowc.state.manifest import Location, OptionValue, QueryState


class Effect(StrEnum):
    REFUSED = "refused"
    #: A sink's target: refused when the query keeps state and writes updates (the new
    #: target would hold only the groups updated from now on), else allowed with warning.
    REFUSED_IF_UPDATING = "refused with state in update mode, else allowed with warning"
    WARNED = "allowed with warning"
    ALLOWED = "allowed"


@dataclass(frozen=True, slots=True)
class Rule:
    effect: Effect
    why: str
    #: Compared by another part of flowc.state.compare (sources, sink, operators, scale).
    elsewhere: bool = False


_PARSE = Rule(
    Effect.WARNED,
    "files read from now on are parsed the new way; the state and the rows written keep "
    "what the old options read (right if the files changed their layout too, wrong if not)",
)
_RATE = Rule(Effect.ALLOWED, "a rate limit: how much is read per micro-batch, not what")
_DATA = Rule(
    Effect.WARNED,
    "generated rows from now on differ from what the old options would have made; the "
    "state keeps the rows made before",
)
_LAYOUT = Rule(
    Effect.REFUSED,
    "the sink's folder would hold files of two layouts, which no single read of it "
    "parses right: write to a new path, or start over (--reset-state)",
)
_SECRET = Rule(Effect.ALLOWED, "credentials: where and how to connect, not what is written")

#: (connector, option) → rule, for a source or a table. ``kafka.*``: every such option.
SOURCE_RULES: dict[tuple[str, str], Rule] = {
    ("files", "path"): Rule(
        Effect.REFUSED,
        "the checkpoint records the files read, by source position: other files are another source",
        elsewhere=True,
    ),
    ("files", "format"): Rule(Effect.REFUSED, "another format is another source", elsewhere=True),
    ("files", "max_files_per_trigger"): _RATE,
    ("files", "latest_first"): Rule(
        Effect.ALLOWED, "the order new files are read in; files read before are not read again"
    ),
    ("files", "on_error"): Rule(
        Effect.ALLOWED,
        "a malformed record fails the query or goes to FROM source.errors; the rows read "
        "well are the same",
    ),
    **{
        ("files", key): _PARSE
        for key in (
            "header",
            "delimiter",
            "quote",
            "escape",
            "encoding",
            "multiline",
            "timestamp_format",
            "date_format",
            "null_value",
            "comment",
            "line_sep",
        )
    },
    ("files", "compression"): Rule(
        Effect.ALLOWED, "Spark reads compressed files by their extension, whatever the option"
    ),
    ("files", "debezium-json.schema-include"): _PARSE,
    ("files", "debezium-json.ignore-parse-errors"): Rule(
        Effect.ALLOWED,
        "only false is taken (a malformed envelope fails the query or goes to FROM "
        "source.errors, as on_error says): the rows read are the same",
    ),
    ("datagen", "rows_per_second"): _RATE,
    ("datagen", "number_of_rows"): _DATA,
    ("datagen", "seed"): _DATA,
    ("datagen", "fields.*"): _DATA,
    ("rate", "rows_per_second"): _RATE,
    ("rate", "ramp_up_time"): _RATE,
    ("rate", "num_partitions"): Rule(
        Effect.ALLOWED, "how the generated rows are split into partitions, not which rows"
    ),
    ("socket", "host"): Rule(
        Effect.WARNED, "another server: Spark's socket source keeps no offsets to go on from"
    ),
    ("socket", "port"): Rule(
        Effect.WARNED, "another server: Spark's socket source keeps no offsets to go on from"
    ),
    ("socket", "include_timestamp"): Rule(
        Effect.ALLOWED, "adds a column; the state is checked column by column"
    ),
    ("kafka", "topic"): Rule(
        Effect.REFUSED,
        "the checkpoint holds offsets per topic partition: another topic is another source",
        elsewhere=True,
    ),
    ("kafka", "format"): Rule(Effect.REFUSED, "another format is another source", elsewhere=True),
    ("kafka", "bootstrap_servers"): Rule(
        Effect.WARNED,
        "the checkpoint's offsets are the old cluster's: right for the same cluster under "
        "another address, wrong for another cluster",
    ),
    ("kafka", "starting_offsets"): Rule(
        Effect.ALLOWED, "read only by a new query: a restart goes on from the checkpoint's offsets"
    ),
    ("kafka", "fail_on_data_loss"): Rule(
        Effect.ALLOWED, "whether lost offsets fail the query, not what is read"
    ),
    ("kafka", "max_offsets_per_trigger"): _RATE,
    ("kafka", "kafka.*"): Rule(Effect.ALLOWED, "the Kafka client's settings (values not stored)"),
}

_TARGET = Rule(
    Effect.REFUSED_IF_UPDATING,
    "another target: it gets the rows written from now on; an updating query (state, "
    "update mode) would write only the groups updated from now on, so the new target "
    "would miss the others",
)

#: (connector, option) → rule, for a sink; ``mode`` is every sink's.
SINK_RULES: dict[tuple[str, str], Rule] = {
    ("files", "path"): Rule(
        Effect.REFUSED,
        "a file sink's commit log and the checkpoint's batch ids go together",
        elsewhere=True,
    ),
    ("files", "format"): Rule(
        Effect.REFUSED, "the folder would hold files of two formats", elsewhere=True
    ),
    ("files", "partition_by"): Rule(
        Effect.REFUSED,
        "the folder's files would be partitioned two ways: Spark cannot read the folder "
        "(CONFLICTING_PARTITION_COLUMN_NAMES)",
    ),
    ("files", "key"): Rule(
        Effect.REFUSED,
        "the upsert table's rows are identified by their key: another key is another table",
    ),
    ("files", "mode"): Rule(
        Effect.REFUSED, "an append-only folder and an upsert table are different folders"
    ),
    **{
        ("files", key): _LAYOUT
        for key in (
            "header",
            "delimiter",
            "quote",
            "escape",
            "encoding",
            "timestamp_format",
            "date_format",
            "null_value",
            "line_sep",
        )
    },
    ("files", "compression"): Rule(
        Effect.ALLOWED, "readers decompress each file by its extension, so codecs can mix"
    ),
    **{
        ("files", key): Rule(Effect.ALLOWED, "a reading option: a sink does not use it")
        for key in (
            "multiline",
            "comment",
            "max_files_per_trigger",
            "latest_first",
            "on_error",
        )
    },
    ("postgres", "host"): _TARGET,
    ("postgres", "port"): _TARGET,
    ("postgres", "database"): _TARGET,
    ("postgres", "table"): _TARGET,
    ("postgres", "key"): Rule(
        Effect.REFUSED, "the table's rows are identified by their key: another key is another table"
    ),
    ("postgres", "user"): _SECRET,
    ("postgres", "password"): _SECRET,
    ("postgres", "password_env"): _SECRET,
    ("postgres", "mode"): Rule(
        Effect.WARNED, "rows from now on are appended or upserted the new way"
    ),
    ("kafka", "topic"): _TARGET,
    ("kafka", "bootstrap_servers"): _TARGET,
    ("kafka", "format"): Rule(
        Effect.WARNED, "readers of the topic see messages of both formats from now on"
    ),
    **{
        ("kafka", key): Rule(Effect.ALLOWED, "a reading option: a sink does not use it")
        for key in ("starting_offsets", "fail_on_data_loss", "max_offsets_per_trigger")
    },
    ("kafka", "kafka.*"): Rule(Effect.ALLOWED, "the Kafka client's settings (values not stored)"),
    ("kafka", "mode"): Rule(Effect.WARNED, "messages from now on are written the new way"),
    ("console", "rows"): Rule(Effect.ALLOWED, "how much is printed"),
    ("console", "truncate"): Rule(Effect.ALLOWED, "how it is printed"),
    ("console", "mode"): Rule(Effect.ALLOWED, "what is printed from now on"),
    ("memory", "mode"): Rule(Effect.ALLOWED, "a memory table starts empty every run"),
    ("noop", "mode"): Rule(Effect.ALLOWED, "nothing is written"),
}

#: Spark's settings that Spark 4.3 freezes in a checkpoint (an offsets file's ``conf``):
#: on a restart it keeps the checkpoint's value and ignores the new one.
FROZEN_SPARK_CONF = frozenset(
    {
        "spark.sql.dropDuplicates.deterministicKeyOrder.enabled",
        "spark.sql.function.protobufExtensions.enabled",
        "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan",
        "spark.sql.streaming.aggregation.stateFormatVersion",
        "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion",
        "spark.sql.streaming.join.stateFormatVersion",
        "spark.sql.streaming.multipleWatermarkPolicy",
        "spark.sql.streaming.queryEvolution.enableSourceEvolution",
        "spark.sql.streaming.stateStore.compression.codec",
        "spark.sql.streaming.stateStore.encodingFormat",
        "spark.sql.streaming.stateStore.rocksdb.formatVersion",
        "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion",
        "spark.sql.streaming.stateStore.rowChecksum.enabled",
        "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled",
        "spark.sql.streaming.statefulOperator.useStrictDistribution",
    }
)

#: Spark's settings that change what expressions compute.
_MEANING_SPARK_CONF = ("spark.sql.session.timeZone", "spark.sql.ansi.enabled", "spark.sql.legacy.")

#: Setting → rule; ``spark.*`` is every other Spark setting.
SETTING_RULES: dict[str, Rule] = {
    "parallelism": Rule(
        Effect.WARNED,
        "rescaled (E0821): flowc run repartitions the state to the new count before the "
        "query starts (RocksDB store, Spark 4.2+; else refused, E0826)",
        elsewhere=True,
    ),
    "max_parallelism": Rule(
        Effect.WARNED,
        "rescaled (E0821): Spark ignores it; Flink would not restore keyed state",
        elsewhere=True,
    ),
    "spark.sql.shuffle.partitions": Rule(
        Effect.WARNED,
        "rescaled (E0821): frozen in the checkpoint; flowc run repartitions the state to the "
        "new value before the query starts (RocksDB store, Spark 4.2+; else refused, E0826)",
        elsewhere=True,
    ),
    "chaining": Rule(Effect.ALLOWED, "Flink's chains: Spark runs the same operators"),
    "execution.mode": Rule(
        Effect.ALLOWED, "a batch run keeps no checkpoint and leaves the streaming one as it is"
    ),
    "batch.auto_parallelism": Rule(
        Effect.ALLOWED,
        "whether Flink's batch JobGraph says -1 where it decides a vertex's parallelism; "
        "flowc plans the same bound either way",
    ),
    "checkpoint.interval": Rule(Effect.ALLOWED, "how often micro-batches run, not what they do"),
    "checkpoint.mode": Rule(
        Effect.ALLOWED, "Flink's barrier alignment: Spark commits each micro-batch either way"
    ),
    "checkpoint.dir": Rule(
        Effect.WARNED,
        "the queries start over with empty state in the new folder; the old state stays "
        "behind (flowc diff lists it; a file sink's folder then refuses the run, E0810)",
        elsewhere=True,
    ),
    "job.name": Rule(
        Effect.WARNED,
        "a new checkpoint folder: the queries start over (flowc diff lists it)",
        elsewhere=True,
    ),
    "sql.dialect": Rule(
        Effect.ALLOWED, "how expressions are read: what they compute is compared (lineage)"
    ),
    "exchanges": Rule(
        Effect.ALLOWED,
        "shuffles of stateless steps only: each stateful operator keeps its own exchange",
    ),
    "state.backend.type": Rule(
        Effect.WARNED,
        "Spark keeps the store the checkpoint froze (E0824 on a restart)",
    ),
    "state.backend.changelog.enabled": Rule(
        Effect.ALLOWED, "Spark's RocksDB store turns changelog checkpointing on or off on restart"
    ),
    "spark.sql.session.timeZone": Rule(
        Effect.WARNED,
        "local times (hour(), date_format, to_date, casts to and from strings) computed "
        "from now on differ; the state keeps what the old zone gave",
    ),
    "spark.sql.ansi.enabled": Rule(
        Effect.WARNED,
        "overflows and bad casts fail the query or give NULL from now on; the state keeps "
        "what the old rules gave",
    ),
    "spark.sql.legacy.*": Rule(
        Effect.WARNED, "Spark's legacy behaviours change what some expressions compute"
    ),
    "spark.sql.streaming.* frozen in the checkpoint": Rule(
        Effect.WARNED,
        "Spark keeps the checkpoint's value and ignores the new one (FROZEN_SPARK_CONF)",
    ),
    "spark.*": Rule(Effect.ALLOWED, "tuning: how Spark runs, not what it computes"),
}

_SECRET_KEYS = ("password", "secret", "token", "credential", "jaas")


def stored_value(key: str, value: object) -> str:
    """An option's value as the manifest keeps it: secrets as a digest only."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if key.startswith("kafka.") or any(word in key.lower() for word in _SECRET_KEYS):
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return text


def source_rule(connector: str, key: str) -> Rule | None:
    return _lookup(SOURCE_RULES, connector, key)


def sink_rule(connector: str, key: str) -> Rule | None:
    return _lookup(SINK_RULES, connector, key)


def setting_rule(key: str) -> Rule:
    if key in SETTING_RULES:
        return SETTING_RULES[key]
    if key in FROZEN_SPARK_CONF:
        return SETTING_RULES["spark.sql.streaming.* frozen in the checkpoint"]
    if key.startswith("spark.sql.legacy."):
        return SETTING_RULES["spark.sql.legacy.*"]
    return SETTING_RULES["spark.*"]


def _lookup(rules: Mapping[tuple[str, str], Rule], connector: str, key: str) -> Rule | None:
    found = rules.get((connector, key))
    if found is None and "." in key:
        found = rules.get((connector, key.split(".", 1)[0] + ".*"))
    return found


# ---------------------------------------------------------------- comparison


def option_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    """What a query's changed options and settings mean (those another part of the
    comparison covers are left to it)."""
    name = new.name
    updating = bool(new.operators) and new.output_mode == "update"
    old_sources = {s.name: s for s in old.sources}
    for source in new.sources:
        was = old_sources.get(source.name)
        if was is None or was.options is None or source.options is None:
            continue
        if was.where != source.where:
            continue  # another source: said by the sources' finding
        for key, before, after in _changed(was.options, source.options):
            rule = source_rule(source.connector, key) or Rule(Effect.WARNED, "an option")
            yield from _finding(
                rule,
                f"source '{source.name}': option {key} is now {_shown(after)}, was "
                f"{_shown(before)}",
                name,
                False,
                after.location if after is not None else None,
                new.location,
                old.location,
                "source_options",
            )
        if was.columns is not None and source.columns is not None and was.columns != source.columns:
            yield Finding(
                Verdict.COMPATIBLE,
                "source_columns",
                f"source '{source.name}': its columns are now ({source.columns}), were "
                f"({was.columns}); what the state keeps is checked column by column",
                None,
                old.location,
                new.location,
            )
    a, b = old.sink, new.sink
    if a.options is not None and b.options is not None and a.connector == b.connector:
        for key, before, after in _changed(a.options, b.options):
            rule = sink_rule(b.connector, key) or Rule(Effect.WARNED, "an option")
            if rule.elsewhere:
                continue
            yield from _finding(
                rule,
                f"sink '{b.name}': option {key} is now {_shown(after)}, was {_shown(before)}",
                name,
                updating,
                after.location if after is not None else None,
                b.location,
                a.location,
                "sink_options",
            )
    if old.settings is not None and new.settings is not None:
        for key, before, after in _changed(old.settings, new.settings):
            rule = setting_rule(key)
            if rule.elsewhere or (not new.operators and key in FROZEN_SPARK_CONF):
                continue
            yield from _finding(
                rule,
                f"setting {key} is now {_shown(after)}, was {_shown(before)}",
                name,
                updating,
                after.location if after is not None else None,
                new.location,
                old.location,
                "state_store" if key.startswith("state.backend.") else "settings",
            )


def _finding(
    rule: Rule,
    what: str,
    query: str,
    updating: bool,
    at: Location | None,
    fallback: Location,
    old: Location,
    aspect: str,
) -> Iterator[Finding]:
    if rule.effect is Effect.ALLOWED:
        yield Finding(Verdict.COMPATIBLE, aspect, f"{what}: {rule.why}", None, old, at or fallback)
        return
    refused = rule.effect is Effect.REFUSED or (
        rule.effect is Effect.REFUSED_IF_UPDATING and updating
    )
    if refused:
        yield Finding(
            Verdict.INCOMPATIBLE,
            aspect,
            f"{what}: {rule.why}",
            ways_out(query),
            old,
            at or fallback,
        )
        return
    yield Finding(
        Verdict.COMPATIBLE,
        aspect,
        f"{what}: {rule.why}",
        f"if that is not what you want, revert it; or start this query over (a new "
        f"--checkpoint-dir, or flowc run --reset-state {query})",
        old,
        at or fallback,
        warning=True,
    )


def _changed(
    old: Sequence[OptionValue], new: Sequence[OptionValue]
) -> Iterator[tuple[str, OptionValue | None, OptionValue | None]]:
    before = {o.key: o for o in old}
    after = {o.key: o for o in new}
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if (a.value if a else None) != (b.value if b else None):
            yield key, a, b


def _shown(option: OptionValue | None) -> str:
    return "unset" if option is None else f"'{option.value}'"


# ---------------------------------------------------------------- the docs' table


def option_table() -> str:
    """docs/state.md's table of every option's and setting's verdict (Markdown)."""
    lines = ["| what | option | verdict | why |", "|---|---|---|---|"]
    for (connector, key), rule in SOURCE_RULES.items():
        lines.append(f"| source or table `{connector}` | `{key}` | {rule.effect} | {rule.why} |")
    for (connector, key), rule in SINK_RULES.items():
        lines.append(f"| sink `{connector}` | `{key}` | {rule.effect} | {rule.why} |")
    for key, rule in SETTING_RULES.items():
        shown = key if " " in key else f"`{key}`"
        lines.append(f"| setting | {shown} | {rule.effect} | {rule.why} |")
    return "\n".join(lines) + "\n"
