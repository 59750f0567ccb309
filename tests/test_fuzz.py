"""Hypothesis feeds generated and mutated programs to `flowc check`: exit 0 or 1, no crash."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowc.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TEXTS = [p.read_text() for p in sorted((ROOT / "examples").rglob("*.flow"))]

COLUMNS = {"k": "BIGINT", "v": "DOUBLE", "name": "STRING", "ts": "TIMESTAMP", "ok": "BOOLEAN"}
VOCABULARY = [
    *[
        "SET",
        "CREATE",
        "SOURCE",
        "SINK",
        "VIEW",
        "AS",
        "WITH",
        "INSERT",
        "INTO",
        "FROM",
        "WHERE",
        "SELECT",
        "EXTEND",
        "DROP",
        "RENAME",
    ],
    *[
        "EXPLODE",
        "KEY",
        "BY",
        "REBALANCE",
        "RESCALE",
        "SHUFFLE",
        "BROADCAST",
        "GLOBAL",
        "FORWARD",
        "PARTITION",
        "WINDOW",
    ],
    *[
        "TUMBLE",
        "HOP",
        "SESSION",
        "AGGREGATE",
        "DEDUPLICATE",
        "ON",
        "WITHIN",
        "JOIN",
        "UNION",
        "ALL",
        "ROUTE",
        "WHEN",
        "CASE",
        "END",
    ],
    *["|>", "(", ")", ",", ";", "=", ".", "'x'", "`q`", "1", "-", "*", "<", ">", "--", "/*"],
    *["k", "v", "ts", "s", "o", "count(*)", "INTERVAL 1 SECOND", "parallelism", "uid"],
]


def _check(text: str) -> int:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzz.flow"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return main(["check", "--format", "json", str(path)])


# ---------------------------------------------------------------- generated programs

hint = st.sampled_from(
    [
        "",
        " WITH (parallelism = 2)",
        " WITH (parallelism = 3, uid = 'u')",
        " WITH (max_parallelism = 4, parallelism = 8)",
        " WITH (chaining = 'never', slot_sharing_group = 'g')",
        " WITH (name = 'n', chaining = 'new_chain')",
        " WITH (nonsense = 1)",
    ]
)
column = st.sampled_from([*COLUMNS, "missing"])
step = st.one_of(
    st.builds(lambda c, h: f"WHERE {c} IS NOT NULL{h}", column, hint),
    st.builds(lambda c, h: f"SELECT {c}, k + 1 AS k2{h}", column, hint),
    st.builds(lambda c, h: f"EXTEND {c} AS copy{h}", column, hint),
    st.builds(lambda c: f"DROP {c}", column),
    st.builds(lambda c: f"RENAME {c} AS renamed", column),
    st.builds(lambda c: f"KEY BY {c}", column),
    st.sampled_from(["REBALANCE", "RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD"]),
    st.builds(lambda c: f"PARTITION BY {c}", column),
    st.builds(lambda h: f"AGGREGATE count(*) AS n, max(v) AS top{h}", hint),
    st.builds(
        lambda h: f"WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n{h}", hint
    ),
    st.builds(lambda c: f"DEDUPLICATE ON {c} WITHIN INTERVAL 1 HOUR", column),
    st.sampled_from(
        ["JOIN t ON s.k = t.k", "UNION ALL t", "ROUTE big WHEN v > 1, odd WHEN k % 2 = 1"]
    ),
    st.builds(lambda c: f"EXPLODE split({c}, ',') AS part", column),
)


@st.composite
def programs(draw: st.DrawFn) -> str:
    parallelism = draw(st.integers(min_value=0, max_value=40))
    lines = [f"SET parallelism = {parallelism};"]
    if draw(st.booleans()):
        lines.append(f"SET max_parallelism = {draw(st.integers(min_value=1, max_value=300))};")
    columns = draw(st.lists(st.sampled_from(list(COLUMNS)), min_size=1, max_size=5, unique=True))
    schema = ", ".join(f"{c} {COLUMNS[c]}" for c in columns)
    watermark = ", WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS" if "ts" in columns else ""
    for name in ("s", "t"):
        connector = draw(st.sampled_from(["datagen", "files", "rate", "socket"]))
        options = {"files": ", path = 'in', format = 'json'", "socket": ", host = 'h', port = 9"}
        lines.append(
            f"CREATE SOURCE {name} ({schema}{watermark}) WITH (connector = '{connector}'"
            f"{options.get(connector, '')}{draw(hint).replace(' WITH (', ', ').rstrip(')')});"
        )
    lines.append(
        f"CREATE SINK o WITH (connector = '{draw(st.sampled_from(['console', 'noop', 'files']))}');"
    )
    view_steps = draw(st.lists(step, max_size=4))
    lines.append("CREATE VIEW w AS FROM s" + "".join(f" |> {x}" for x in view_steps) + ";")
    insert_steps = draw(st.lists(step, max_size=4))
    origin = draw(st.sampled_from(["w", "s", "w.big", "t"]))
    lines.append(f"INSERT INTO o FROM {origin}" + "".join(f" |> {x}" for x in insert_steps) + ";")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_never_crash(text: str) -> None:
    assert _check(text) in (0, 1)


# ---------------------------------------------------------------- mutated examples

_TOKEN = re.compile(r"'[^']*'|`[^`]*`|--[^\n]*|\|>|\w+|\s+|.", re.S)


@st.composite
def mutated_examples(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(EXAMPLE_TEXTS))
    tokens = _TOKEN.findall(text)
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        if not tokens:
            break
        i = draw(st.integers(min_value=0, max_value=len(tokens) - 1))
        operation = draw(st.sampled_from(["delete", "insert", "swap", "duplicate", "char"]))
        if operation == "delete":
            del tokens[i]
        elif operation == "insert":
            tokens.insert(i, " " + draw(st.sampled_from(VOCABULARY)) + " ")
        elif operation == "swap":
            j = draw(st.integers(min_value=0, max_value=len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif operation == "duplicate":
            tokens.insert(i, tokens[i])
        else:
            position = draw(st.integers(min_value=0, max_value=len(tokens[i])))
            char = draw(st.characters(codec="utf-8", exclude_categories=["Cs"]))
            tokens[i] = tokens[i][:position] + char + tokens[i][position:]
    return "".join(tokens)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_examples())
def test_mutated_examples_never_crash(text: str) -> None:
    assert _check(text) in (0, 1)


@pytest.mark.parametrize("text", EXAMPLE_TEXTS[:1])
def test_fuzz_harness_sees_crashes(
    text: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The harness would notice a crash: an exception inside compile becomes exit 101."""

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("flowc.job.compile", crash)
    monkeypatch.setenv("FLOWC_CRASH_DIR", str(tmp_path))
    assert _check(text) == 101
