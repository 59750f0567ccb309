"""Settings (``SET``, ``--set``) and hints (``/*+ ... */``, hint options in WITH (...)).

Both are read before anything else needs them, so they take the reporter, not the
analysis context: the settings decide how expressions are checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath

from flowc import ast, catalog
from flowc.analyze import state_store
from flowc.diagnostics import Reporter, did_you_mean
from flowc.errorcodes import Code
from flowc.program import Hints, Settings
from flowc.spans import Span
from flowc.trust import policy as trust


def read_settings(
    tree: ast.Program, overrides: Sequence[trust.Override], reporter: Reporter
) -> Settings:
    """The program's settings, with ``--set`` overrides applied last (the last word)."""
    values: dict[str, object] = {}
    spans: dict[str, Span] = {}
    spark: dict[str, str] = {}
    options = [s.option for s in tree.statements if isinstance(s, ast.SetStmt)]
    options += [o.option() for o in overrides if o.is_setting]
    for option in options:
        written = option.key
        key = catalog.FLINK_SETTINGS.get(written, written)  # Flink's name for it, or flowc's
        if key in spans and option.span.file != trust.COMMAND_LINE:
            reporter.warning(
                Code.W0003,
                f"'{written}' is set again; the earlier value is overridden"
                if key == written
                else f"'{written}' is flowc's '{key}', set already; the earlier value is "
                "overridden",
                option.key_span,
                help=f"first set at {spans[key]}",
            )
        if key.startswith(catalog.SETTING_PREFIXES):
            spark[key] = str(option.value.python)
            spans[key] = option.span
            continue
        kind = catalog.SETTINGS.get(key)
        if kind is None:
            reporter.error(
                Code.E0301,
                f"unknown setting '{key}'",
                option.key_span,
                help=did_you_mean(key, [*catalog.SETTINGS, *catalog.FLINK_SETTINGS])
                or "settings: " + ", ".join(sorted(catalog.SETTINGS)) + ", spark.*",
            )
            continue
        try:
            values[key] = kind.parse(option.value)
        except catalog.OptionValueError as error:
            reporter.error(
                Code.E0302,
                f"invalid value for setting '{written}': {error}",
                option.value.span,
                help=f"'{written}' takes {kind.description}",
            )
            continue
        if key == "job.name" and (unprintable := _unprintable(str(values[key]))):
            del values[key]
            reporter.error(
                Code.E0413,
                f"job.name contains the control character {unprintable}",
                option.value.span,
                help="a job name becomes a folder name, a Python docstring and log lines: "
                "use printable characters",
            )
            continue
        spans[key] = option.span
    parallelism = _int(values, "parallelism")
    settings = Settings(
        parallelism=1 if parallelism is None else parallelism,
        max_parallelism=_int(values, "max_parallelism"),
        chaining=bool(values.get("chaining", True)),
        execution_mode=str(values.get("execution.mode", "streaming")),
        auto_parallelism=bool(values.get("batch.auto_parallelism", True)),
        checkpoint_interval_ms=_int(values, "checkpoint.interval"),
        checkpoint_mode=str(values.get("checkpoint.mode", "exactly_once")),
        checkpoint_dir=_str(values, "checkpoint.dir"),
        job_name=str(values.get("job.name", PurePath(tree.file).stem or "job")),
        sql_dialect=str(values.get("sql.dialect", "spark")),
        exchanges=str(values.get("exchanges", "minimal")),
        state_backend=_str(values, "state.backend.type"),
        state_changelog=_bool(values, "state.backend.changelog.enabled"),
        spark_conf=tuple(sorted(spark.items())),
        spans=spans,
    )
    interval = settings.checkpoint_interval_ms
    if interval is not None and interval < 10:
        reporter.error(
            Code.E0302,
            f"checkpoint interval {interval} ms is below Flink's minimum of 10 ms",
            spans["checkpoint.interval"],
            help="use 10ms or more",
        )
    if settings.max_parallelism is not None and settings.parallelism > settings.max_parallelism:
        reporter.error(
            Code.E0305,
            f"parallelism {settings.parallelism} is larger than max_parallelism "
            f"{settings.max_parallelism}",
            spans["parallelism"],
            help="Maximum parallelism must not be smaller than parallelism: "
            "raise max_parallelism or lower parallelism",
        )
    _check_state_store(settings, spans, reporter)
    return settings


#: flowc's state-store settings and the spark.* settings that say the same thing.
_STATE_STORE_TWINS = {
    "state.backend.type": state_store.PROVIDER_CLASS_CONF,
    "state.backend.changelog.enabled": state_store.CHANGELOG_CONF,
}


def _check_state_store(settings: Settings, spans: Mapping[str, Span], reporter: Reporter) -> None:
    """Refuse state-store settings Spark would not honour: the same choice made twice
    (flowc's key and Spark's), or a changelog for a store that has none."""
    for key, twin in _STATE_STORE_TWINS.items():
        if key in spans and twin in spans:
            reporter.error(
                Code.E0308,
                f"'{key}' and '{twin}' are one setting (flowc's name and Spark's), set twice",
                spans[twin],
                help=f"keep one of them: '{key}' is set at {spans[key]}",
            )
    conf = dict(settings.spark_conf)
    if settings.state_changelog:
        changelog_key = "state.backend.changelog.enabled"
    elif conf.get(state_store.CHANGELOG_CONF, "").strip().lower() == "true":
        changelog_key = state_store.CHANGELOG_CONF
    else:
        return  # no changelog asked for
    backend = settings.state_backend or state_store.DEFAULT_BACKEND
    provider = conf.get(state_store.PROVIDER_CLASS_CONF, state_store.PROVIDERS[backend])
    if provider != state_store.ROCKSDB_PROVIDER:
        store = "hashmap (Spark's HDFS-backed store)"
        if provider != state_store.HDFS_PROVIDER:
            store = provider
        reporter.error(
            Code.E0308,
            f"changelog checkpointing needs the RocksDB state store: {store} has none, and "
            "Spark would ignore the setting",
            spans[changelog_key],
            help="add SET state.backend.type = 'rocksdb'; or remove this setting",
        )


#: The hints of a step that gives none.
_NO_HINTS = Hints()


def read_hints(options: Sequence[ast.Option], reporter: Reporter) -> Hints:
    """Hints from options whose keys are known hints (``catalog.HINTS``)."""
    if not options:  # most steps: the defaults, one shared value (frozen; nothing changes spans)
        return _NO_HINTS
    values: dict[str, object] = {}
    spans: dict[str, Span] = {}
    for option in options:
        kind = catalog.HINTS[option.key]
        if option.key in spans:
            reporter.error(
                Code.E0303,
                f"hint '{option.key}' is given twice",
                option.key_span,
                help=f"first given at {spans[option.key]}",
            )
            continue
        try:
            values[option.key] = kind.parse(option.value)
        except catalog.OptionValueError as error:
            reporter.error(
                Code.E0304,
                f"invalid value for hint '{option.key}': {error}",
                option.value.span,
                help=f"'{option.key}' takes {kind.description}",
            )
            continue
        spans[option.key] = option.span
    return Hints(
        name=_str(values, "name"),
        uid=_str(values, "uid"),
        parallelism=_int(values, "parallelism"),
        max_parallelism=_int(values, "max_parallelism"),
        slot_sharing_group=_str(values, "slot_sharing_group"),
        chaining=str(values.get("chaining", "always")),
        spans=spans,
    )


def step_hints(step: ast.Step, reporter: Reporter) -> Hints:
    """A pipe step's ``/*+ ... */`` hints; an unknown hint is E0303."""
    known = []
    for option in step.hints:
        if option.key in catalog.HINTS:
            known.append(option)
        else:
            reporter.error(
                Code.E0303,
                f"unknown hint '{option.key}'",
                option.key_span,
                help=did_you_mean(option.key, catalog.HINTS)
                or "hints: " + ", ".join(catalog.HINTS),
            )
    return read_hints(known, reporter)


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


def _int(values: Mapping[str, object], key: str) -> int | None:
    """A value the catalog parsed as a whole number (its kind says so), or None if unset."""
    value = values.get(key)
    assert value is None or (isinstance(value, int) and not isinstance(value, bool)), key
    return value


def _bool(values: Mapping[str, object], key: str) -> bool | None:
    value = values.get(key)
    return value if isinstance(value, bool) else None


def _str(values: Mapping[str, object], key: str) -> str | None:
    """A value the catalog parsed as text, or None if unset."""
    value = values.get(key)
    assert value is None or isinstance(value, str), key
    return value
