"""Fuzzing: generated and mutated programs through every pass, every stage and the CLI.

The inputs come from tests/fuzzing.py, which benchmarks/soak.py also uses (100,000
cases, outside CI). Here a few hundred cases: hypothesis draws generated programs and
token- and byte-level mutants of the examples (and shrinks any failure), every example
in examples/ and examples/errors/ is mutated from fixed seeds, and a sample goes through
``flowc.cli.main.main`` in-process and through real ``python -m flowc`` processes. Nothing may
crash; the CLI exits 0, 1 or 2 with no traceback, and with the code the outcome implies.
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzzing import (
    EXAMPLES,
    DrawChooser,
    Outcome,
    cli_problem,
    decode,
    generate_program,
    mutate_bytes,
    mutate_tokens,
    nested_program,
    nested_yaml,
    run_cli,
    run_cli_subprocess,
    run_data,
    run_passes,
    seeded,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowc
from tests.helpers.strategies import programs, token_mutants

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def byte_mutants(draw: Callable[[Any], Any]) -> bytes:
    chooser = DrawChooser(draw)
    return mutate_bytes(chooser, EXAMPLES[chooser.choice(sorted(EXAMPLES))].encode())


@pytest.fixture(autouse=True)
def _crash_reports(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash reports of the in-process CLI go to a temporary folder, not /tmp."""
    monkeypatch.setenv("FLOWC_CRASH_DIR", str(tmp_path_factory.mktemp("crashes")))


# ---------------------------------------------------------------- hypothesis


@FUZZ
@given(programs())
def test_generated_programs_pass_every_stage(text: str) -> None:
    """Every pass; every stage in every format; the PySpark program parses as Python."""
    run_passes(text)


@FUZZ
@given(token_mutants())
def test_token_mutants_never_crash(text: str) -> None:
    run_passes(text)


@settings(FUZZ, max_examples=100)
@given(byte_mutants())
def test_byte_mutants_never_crash(data: bytes) -> None:
    run_data(data)


# ---------------------------------------------------------------- every example


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_mutated(name: str, tmp_path: Path) -> None:
    """Four token-level and four byte-level mutants of each example, from fixed seeds; the
    first of each also through the CLI's check, check --format json, --emit all and
    --emit pyspark (in-process), with the exit code the outcome implies."""
    text = EXAMPLES[name]
    for seed in range(4):
        chooser = seeded(_seed(name, seed))
        token_mutant = mutate_tokens(chooser, text).encode("utf-8", "surrogatepass")
        byte_mutant = mutate_bytes(chooser, text.encode())
        for data in (token_mutant, byte_mutant):
            outcome = run_data(data)
            if seed == 0:
                for result in run_cli(data, tmp_path, outcome):
                    assert cli_problem(result) is None, (result.argv, data)


def _seed(name: str, seed: int) -> int:
    """A seed from the example's name that does not depend on PYTHONHASHSEED."""
    return (
        int(sum(ord(ch) * pow(31, i, 1_000_003) for i, ch in enumerate(name))) % 1_000_003 * 10
        + seed
    )


# ---------------------------------------------------------------- the CLI


def _sample(count: int) -> list[bytes]:
    """Generated programs, token mutants and byte mutants, from fixed seeds."""
    inputs: list[bytes] = []
    names = sorted(EXAMPLES)
    for seed in range(count):
        chooser = seeded(seed)
        if seed % 3 == 0:
            inputs.append(generate_program(chooser).encode())
        elif seed % 3 == 1:
            text = EXAMPLES[names[seed % len(names)]]
            inputs.append(mutate_tokens(chooser, text).encode("utf-8", "surrogatepass"))
        else:
            inputs.append(mutate_bytes(chooser, EXAMPLES[names[seed % len(names)]].encode()))
    return inputs


def test_generated_programs_through_the_cli(tmp_path: Path) -> None:
    """30 generated programs through check, check --format json, --emit all and
    --emit pyspark in-process: exit 0, 1 or 2 as the outcome implies, no traceback."""
    for seed in range(30):
        data = generate_program(seeded(1000 + seed)).encode()
        for result in run_cli(data, tmp_path):
            assert cli_problem(result) is None, (result.argv, data.decode())


def test_cli_processes_on_fuzzed_inputs(tmp_path: Path) -> None:
    """Real processes: ``flowc check`` over 33 files at once (30 fuzzed), and ``--emit all`` and
    ``--emit pyspark`` on three files whose outcomes differ (clean, errors, not UTF-8),
    fuzzed ones where the sample has them."""
    # The sample, then one file of each outcome, in case the sample lacks one.
    fixed = [EXAMPLES["examples/wordcount.flow"].encode(), b"CREATE;", b"\xff"]
    inputs = _sample(30) + fixed
    paths = []
    for i, data in enumerate(inputs):
        path = tmp_path / f"case{i}.flow"
        path.write_bytes(data)
        paths.append(path)
    outcomes = [run_data(data) for data in inputs]
    code, stderr = run_cli_subprocess(paths, ["check"])
    assert "Traceback" not in stderr
    expected = max(o.check_exit for o in outcomes)  # 2 beats 1 beats 0
    assert code == expected, stderr

    picks: dict[int, Path] = {}
    for path, outcome in zip(paths, outcomes, strict=True):
        picks.setdefault(outcome.emit_exit, path)
    assert set(picks) == {0, 1, 2}
    for exit_code, path in sorted(picks.items()):
        for arguments in (
            ["compile", "--emit", "all", "-o", str(tmp_path / "all")],
            ["compile", "--emit", "pyspark"],
        ):
            code, stderr = run_cli_subprocess([path], arguments)
            assert "Traceback" not in stderr
            assert code == exit_code, (arguments, path.read_bytes(), stderr)


# ---------------------------------------------------------------- the fuzzers fuzz


def test_generator_reaches_every_stage_and_many_diagnostics() -> None:
    """Not vacuous: of 200 generated programs, most pass every Flink pass and many reach
    the PySpark generator; every step kind and setting is generated; the rest fail with
    a spread of diagnostics."""
    outcomes = collections.Counter[str]()
    codes: set[str] = set()
    words = collections.Counter[str]()
    for seed in range(200):
        text = generate_program(seeded(seed))
        outcome = run_passes(text, emit=False)
        outcomes[outcome.kind] += 1
        codes.update(outcome.codes)
        words.update(re.findall(r"\b[A-Z][A-Z_]+\b", text))
    assert outcomes["compiled"] >= 80, outcomes  # every stage, the PySpark program too
    assert outcomes["compiled"] + outcomes["spark"] >= 120, outcomes  # every Flink pass
    assert len(codes) >= 15, codes
    steps = ["WHERE", "SELECT", "EXTEND", "DROP", "RENAME", "EXPLODE", "KEY", "REBALANCE",
             "RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD", "PARTITION", "WINDOW",
             "TUMBLE", "HOP", "SESSION", "AGGREGATE", "DEDUPLICATE", "WITHIN", "JOIN", "LEFT",
             "FULL", "UNION", "ROUTE", "WATERMARK", "GROUP", "DISTINCT"]  # fmt: skip
    assert [s for s in steps if words[s] < 3] == []


def test_mutators_change_the_examples() -> None:
    token_changed = byte_changed = not_utf8 = 0
    names = sorted(EXAMPLES)
    for seed in range(200):
        text = EXAMPLES[names[seed % len(names)]]
        token_changed += mutate_tokens(seeded(seed), text) != text
        mutant = mutate_bytes(seeded(seed), text.encode())
        byte_changed += mutant != text.encode()
        not_utf8 += decode(mutant) is None
    assert token_changed >= 180 and byte_changed >= 180
    assert 2 <= not_utf8 <= 100  # some inputs exercise the CLI's exit 2 for bad bytes


def test_same_seed_same_inputs() -> None:
    """The soak's cases are reproducible from their seed."""
    assert generate_program(seeded(7)) == generate_program(seeded(7))
    assert generate_program(seeded(7)) != generate_program(seeded(8))


def test_harness_sees_crashes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A crash inside compile propagates from run_passes and is exit 101 in the CLI."""

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    text = EXAMPLES["examples/wordcount.flow"]
    monkeypatch.setattr("flowc.driver.compile", crash)
    monkeypatch.setattr(flowc, "compile", crash)
    with pytest.raises(RuntimeError, match="boom"):
        run_passes(text)
    results = run_cli(text.encode(), tmp_path, Outcome("compiled"))
    assert [r.code for r in results] == [101] * len(results)
    assert all(cli_problem(r) is not None for r in results)


@st.composite
def nested_programs(draw: Callable[[Any], Any]) -> tuple[str, int]:
    return nested_program(DrawChooser(draw))


@st.composite
def nested_test_files(draw: Callable[[Any], Any]) -> str:
    return nested_yaml(DrawChooser(draw))


@settings(FUZZ, max_examples=60)
@given(nested_programs())
def test_nesting_of_every_kind_never_crashes_and_past_the_bounds_is_e0004(
    case: tuple[str, int],
) -> None:
    """Kinds of nesting mixed, at and past the bounds (docs/limits.md): every stage runs
    or a diagnostic stops it, in bounded time; one kind 161 levels deep is past every
    bound (the tree's 160, the tokens' 64); a few levels of each are within them all."""
    text, levels = case
    started = time.monotonic()
    outcome = run_passes(text)
    assert time.monotonic() - started < 30
    if levels > 160:
        assert "E0004" in outcome.codes, outcome
    if levels <= 3:
        assert "E0004" not in outcome.codes, outcome


@settings(FUZZ, max_examples=60)
@given(nested_test_files())
def test_test_files_with_any_nesting_aliases_tags_or_cycles_never_crash(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """A test file is read or refused with a located diagnostic, quickly, whatever its
    aliases, tags, cycles or nesting."""
    from flowc.usertest import TestFileError, load_test_file

    path = tmp_path_factory.mktemp("yaml") / "job.test.yaml"
    path.write_text(text, encoding="utf-8")
    job = flowc.compile(_TESTED, "job.flow")
    started = time.monotonic()
    try:
        load_test_file(str(path), job)
    except TestFileError as error:
        assert error.diagnostics
        assert all(d.span is not None and d.span.line >= 1 for d in error.diagnostics)
    assert time.monotonic() - started < 10


_TESTED = """\
CREATE SOURCE s (k BIGINT, v STRING) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s;
"""


def test_nested_programs_through_cli_processes(tmp_path: Path) -> None:
    """Real processes on nested programs: exit 0 or 1, never 101, no traceback."""
    from fuzzing import seeded

    paths = []
    for seed in range(6):
        text, _ = nested_program(seeded(1000 + seed))
        path = tmp_path / f"n{seed}.flow"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    code, err = run_cli_subprocess(paths, ["check"])
    assert code in (0, 1), err[-800:]
    assert "Traceback" not in err and "internal error" not in err
