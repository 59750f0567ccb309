"""Every option and setting has a verdict for a restart (flowc.state.options), and
docs/state.md's table is the one the rules give."""

from __future__ import annotations

from pathlib import Path

from flowc.catalog import CONNECTORS, SETTINGS, SINK_ONLY_OPTIONS, SINK_OPTIONS, SOURCE_ONLY_OPTIONS
from flowc.state.options import option_table, setting_rule, sink_rule, source_rule, stored_value


def test_every_option_of_every_connector_has_a_rule() -> None:
    missing = []
    for connector in CONNECTORS.values():
        keys = [*connector.options, *(f"{p}*" for p in connector.option_prefixes)]
        for key in keys:
            name = key.replace("*", "x")
            as_source = "source" in connector.roles and key not in SINK_ONLY_OPTIONS
            if as_source and source_rule(connector.name, name) is None:
                missing.append(("source", connector.name, key))
            as_sink = "sink" in connector.roles and key not in SOURCE_ONLY_OPTIONS
            if as_sink and sink_rule(connector.name, name) is None:
                missing.append(("sink", connector.name, key))
        if "sink" in connector.roles:
            for key in SINK_OPTIONS:
                if sink_rule(connector.name, key) is None:
                    missing.append(("sink", connector.name, key))
    assert missing == []


def test_every_setting_has_its_own_rule() -> None:
    generic = setting_rule("spark.some.tuning")
    assert [key for key in SETTINGS if setting_rule(key) is generic] == []
    assert setting_rule("spark.sql.streaming.stateStore.compression.codec").effect == (
        "allowed with warning"
    )


def test_secrets_are_kept_as_digests() -> None:
    assert stored_value("password", "hunter2").startswith("sha256:")
    assert "hunter2" not in stored_value("password", "hunter2")
    assert stored_value("kafka.sasl.jaas.config", "x").startswith("sha256:")
    assert stored_value("path", "in") == "in"
    assert stored_value("header", True) == "true"


def test_docs_hold_the_table() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "state.md").read_text(encoding="utf-8")
    assert option_table() in docs
