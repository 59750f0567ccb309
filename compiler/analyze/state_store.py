"""Which state store Spark keeps a streaming job's state in, and why.

Flink's two state backends have a Spark counterpart each: ``hashmap`` (objects on the
heap, Flink's default) is Spark's HDFS-backed store, ``rocksdb`` is Spark's RocksDB store.
Flink's changelog (``state.backend.changelog.enabled``) is Spark's changelog
checkpointing, which only the RocksDB store has.

The default is chosen by measurement (``python -m benchmarks.state_store``, BENCHMARKS.md):
on this project's 2-core machines the HDFS-backed store runs a keyed aggregation 1.5 to 2
times as fast as RocksDB at 100k and 1M keys, but keeps the state on the heap, and with
Spark's default 1g heap it ran out at 1M keys where RocksDB did not. So flowc keeps Flink's
default, ``hashmap``, and says in the plan to choose ``rocksdb`` for state of millions of
keys, or for a job that may rescale: only RocksDB's state can be repartitioned, and
switching the default would not move existing checkpoints (Spark freezes the store in
them) but warn on every run of them (docs/state.md, "The default state store"). When
RocksDB is chosen, changelog checkpointing is on unless the program says otherwise: it
writes each batch's changes instead of a snapshot, measured 17-36% faster.

Spark freezes the provider class in a query's checkpoint (offsets/<n>) and ignores a
later change (docs/state.md): ``flowc run`` warns (E0824).
"""

from __future__ import annotations

from flowc.fast_dataclass import dataclass
from flowc.program import Settings

PROVIDER_CLASS_CONF = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
_STATE = "org.apache.spark.sql.execution.streaming.state."
HDFS_PROVIDER = _STATE + "HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = _STATE + "RocksDBStateStoreProvider"

#: Flink's backend names → Spark's provider classes.
PROVIDERS = {"hashmap": HDFS_PROVIDER, "rocksdb": ROCKSDB_PROVIDER}
DEFAULT_BACKEND = "hashmap"

#: Why the default is the default: the measurement behind it (BENCHMARKS.md, "State
#: stores").
MEASURED = (
    "Flink's default; measured faster than rocksdb on a keyed aggregation at 1k, 100k and "
    "1M keys (BENCHMARKS.md, State stores), but it keeps the state on the JVM's heap, which "
    "Spark's default 1g ran out of at 1M keys: for state of millions of keys SET "
    "state.backend.type = 'rocksdb'; and only rocksdb's state can be repartitioned to a new "
    "parallelism: choose it before the first run of a job that may rescale (docs/state.md, "
    "The default state store)"
)


@dataclass(frozen=True, slots=True)
class StateStore:
    """The state store of a job's stateful queries, as planned."""

    #: ``hashmap``, ``rocksdb``, ``custom`` (a provider class set with SET spark.*) or
    #: ``none`` (no state: no stateful operator, or a batch job).
    backend: str
    provider_class: str | None
    #: Changelog checkpointing; None where the store has none.
    changelog: bool | None
    reason: str

    @property
    def conf(self) -> tuple[tuple[str, str], ...]:
        """The Spark settings the generated program makes before its queries start."""
        if self.provider_class is None:
            return ()
        conf = [(PROVIDER_CLASS_CONF, self.provider_class)]
        if self.changelog is not None:
            conf.append((CHANGELOG_CONF, "true" if self.changelog else "false"))
        return tuple(conf)

    def to_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "provider_class": self.provider_class,
            "changelog": self.changelog,
            "reason": self.reason,
        }

    def to_text(self) -> str:
        if self.provider_class is None:
            return f"none ({self.reason})"
        changelog = "" if self.changelog is None else f", changelog {_on(self.changelog)}"
        return f"{self.backend} ({self.provider_class}{changelog}): {self.reason}"


#: Why a job with a stateful processor runs on RocksDB whatever the default.
PROCESSORS = (
    "a step reading CURRENT_WATERMARK, a DEDUPLICATE ... WITHIN, an OVER window, a "
    "MATCH_RECOGNIZE or a TOP keeping each group's first row by event time runs as a "
    "transformWithState processor, which Spark runs only on RocksDB "
    "(STORE_BACKEND_NOT_SUPPORTED_FOR_TWS on the other store), and a job's store is one for "
    "all its queries"
)


#: Why a job whose only processors are an updating pipeline's runs on RocksDB.
UPDATING_PROCESSORS = (
    "a TOP or AGGREGATE whose updates another AGGREGATE consumes runs as a transformWithState "
    "processor, which Spark runs only on RocksDB (STORE_BACKEND_NOT_SUPPORTED_FOR_TWS on the "
    "other store), and a job's store is one for all its queries"
)


#: Why a job whose only processors are JOINs over changes (and the AGGREGATEs or TOPs
#: producing them) runs on RocksDB.
JOIN_PROCESSORS = (
    "a JOIN over changes (a CDC source's, or an AGGREGATE's or a TOP's with the step "
    "producing them) runs as a transformWithState processor, which Spark "
    "runs only on RocksDB (STORE_BACKEND_NOT_SUPPORTED_FOR_TWS on the other store), and a "
    "job's store is one for all its queries"
)


def store_other_than_rocksdb(settings: Settings) -> str | None:
    """What the job sets that is not the RocksDB store, as a diagnostic quotes it
    (``state.backend.type = 'hashmap'``, ``SET <provider conf> = '...'``); None where
    the store is RocksDB or left to flowc, which picks RocksDB for a processor."""
    backend = settings.state_backend
    provider = dict(settings.spark_conf).get(PROVIDER_CLASS_CONF)
    if backend in (None, "rocksdb") and provider in (None, ROCKSDB_PROVIDER):
        return None
    if provider:
        return f"SET {PROVIDER_CLASS_CONF} = '{provider}'"
    return f"state.backend.type = '{backend}'"


def choose_state_store(
    settings: Settings,
    stateful: bool,
    processors: bool = False,
    updating: bool = False,
    joins_only: bool = False,
) -> StateStore:
    """The state store a job runs with: the program's settings, else the measured default
    (RocksDB where a stateful processor runs, the only store Spark runs one on). Conflicting
    settings were refused when they were read (E0308), a store other than RocksDB beside a
    processor by the streaming rules (E0740)."""
    if settings.execution_mode == "batch":
        return StateStore("none", None, None, "a batch job keeps no state between runs")
    if not stateful:
        return StateStore("none", None, None, "no stateful operator")
    conf = dict(settings.spark_conf)
    if PROVIDER_CLASS_CONF in conf:
        provider = conf[PROVIDER_CLASS_CONF]
        backend = next((b for b, c in PROVIDERS.items() if c == provider), "custom")
        why = f"set with SET {PROVIDER_CLASS_CONF}"
    elif settings.state_backend is not None:
        backend = settings.state_backend
        provider = PROVIDERS[backend]
        why = "set with SET state.backend.type"
    elif processors:
        backend, provider, why = "rocksdb", ROCKSDB_PROVIDER, PROCESSORS
    elif updating:
        why = JOIN_PROCESSORS if joins_only else UPDATING_PROCESSORS
        backend, provider = "rocksdb", ROCKSDB_PROVIDER
    else:
        backend, provider, why = DEFAULT_BACKEND, PROVIDERS[DEFAULT_BACKEND], MEASURED
    changelog: bool | None = None
    if backend == "rocksdb":
        if CHANGELOG_CONF in conf:
            changelog = conf[CHANGELOG_CONF].strip().lower() == "true"
            why += f"; changelog set with SET {CHANGELOG_CONF}"
        elif settings.state_changelog is not None:
            changelog = settings.state_changelog
            why += "; changelog set with SET state.backend.changelog.enabled"
        else:
            changelog = True
            why += (
                "; changelog checkpointing on: each batch writes its changes, not a snapshot "
                "(measured 17-36% faster, BENCHMARKS.md)"
            )
    return StateStore(backend, provider, changelog, why)


def _on(flag: bool) -> str:
    return "on" if flag else "off"
