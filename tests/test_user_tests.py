"""``flowc test`` (issue 15, item 3): users' YAML tests beside their jobs, run on the
shared local SparkSession, and ``--plans`` snapshots of their plans.

Every example in examples/ has a test file, and ``flowc test examples/`` passes; a wrong
expected row fails with a readable diff (in the output and in the JUnit report); a test
file naming what the job does not have is refused at the YAML line and column.
"""

from __future__ import annotations

import datetime
import shutil
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

import flowc
from flowc.catalog import is_upsert
from flowc.cli.main import main
from flowc.driver import compile_test_form
from flowc.spark.codegen import generate_pyspark
from flowc.usertest import canonical
from tests.helpers.nexmark_q4 import flink_join

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def copy_job(tmp_path: Path, name: str = "clicks_per_user") -> Path:
    """The example and its data in a folder of the test's own."""
    shutil.copy(ROOT / "examples" / f"{name}.flow", tmp_path / f"{name}.flow")
    shutil.copy(ROOT / "examples" / f"{name}.test.yaml", tmp_path / f"{name}.test.yaml")
    return tmp_path / f"{name}.flow"


def test_every_example_has_a_test_file() -> None:
    missing = [p.name for p in EXAMPLES if not p.with_name(p.stem + ".test.yaml").is_file()]
    assert missing == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_a_test_runs_the_job_the_compiler_made_from_the_test_form(example: Path) -> None:
    """flowc test's substitutions are an input of compilation: every stage is planned from
    the test form (each source reads the test's folder, each sink is a memory sink), and
    the program is checked as written (the same diagnostics)."""
    job = flowc.compile(example.read_text(encoding="utf-8"), str(example), for_spark=True)
    inputs = {s.name: f"/tests/in/{s.name}" for s in job.program.sources}
    outputs = {s.name: f"/tests/out/{s.name}" for s in job.program.sinks}
    # in the mode its tests run in (the job's own where they run in both)
    modes = {
        t.get("mode")
        for t in yaml.safe_load(
            example.with_name(example.stem + ".test.yaml").read_text(encoding="utf-8")
        )["tests"]
    }
    form = compile_test_form(
        job, inputs, mode=modes.pop() if len(modes) == 1 else None, outputs=outputs
    )
    assert form.test_inputs == inputs and job.test_inputs is None
    assert form.diagnostics == job.diagnostics
    assert {(s.name, s.connector, dict(s.options)["path"]) for s in form.program.sources} == {
        (name, "files", path) for name, path in inputs.items()
    }
    # an upsert sink keeps its table in the test's folder, by the same key; others: memory
    upserts = {s.name for s in job.program.sinks if is_upsert(s.connector, s.mode)}
    for sink in form.program.sinks:
        if sink.name in upserts:
            assert (sink.connector, sink.mode) == ("files", "update")
            assert dict(sink.options) == {
                "path": outputs[sink.name],
                "format": "parquet",
                "key": dict(job.program.sink(sink.name).options)["key"],
            }
        else:
            assert sink.connector == "memory"
    generated = generate_pyspark(form)
    for path in [*inputs.values(), *(outputs[name] for name in upserts)]:
        assert f"'{path}'" in generated
    written = "createOrReplaceTempView(" if form.spark_plan.batch else "writer.format('memory')"
    tables = sum(1 for i in form.program.inserts if i.sink in upserts)
    assert generated.count(written) == len(form.spark_plan.queries) - tables
    assert generated.count("file_upsert(") == tables + (1 if tables else 0)  # and its def
    # the plans are the test form's, made by the passes: not the job's plans reused
    assert form.spark_plan != job.spark_plan
    assert generate_pyspark(job) != generated


def test_every_examples_tests_pass(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "junit.xml"
    code, out = run(capsys, "test", str(ROOT / "examples"), "--junit-xml", str(report))
    assert code == 0, out
    suite = ET.parse(report).getroot()
    cases = suite.findall("testcase")
    assert {Path(c.get("classname") or "").name for c in cases} == {
        p.stem + ".test.yaml" for p in EXAMPLES
    }
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert out.strip().splitlines()[-1] == f"{len(cases)} passed, 0 failed"


def test_a_wrong_row_fails_with_a_diff(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = copy_job(tmp_path)
    tests = job.with_name("clicks_per_user.test.yaml")
    tests.write_text(
        tests.read_text(encoding="utf-8").replace("clicks: 2, pages: 2", "clicks: 3, pages: 2"),
        encoding="utf-8",
    )
    report = tmp_path / "junit.xml"
    code, out = run(capsys, "test", str(job), "--junit-xml", str(report))
    assert code == 1
    expected = (
        "      expected but not written (1):\n"
        "        user_id | window_start        | window_end          | clicks | pages\n"
        "        --------+---------------------+---------------------+--------+------\n"
        "        a       | 2026-03-02 09:00:00 | 2026-03-02 09:01:00 | 3      | 2\n"
        "      written but not expected (1):\n"
    )
    assert "FAIL " in out and expected in out
    assert "| 2      | 2\n" in out.split("written but not expected")[1]
    (case,) = ET.parse(report).getroot().findall("testcase")
    failure = case.find("failure")
    assert failure is not None and "expected but not written (1)" in (failure.text or "")
    assert out.strip().splitlines()[-1] == "0 passed, 1 failed"


@pytest.mark.parametrize(
    ("old", "new", "message", "column"),
    [
        ("{user_id: a, url: /A,", "{usr: a, url: /A,", "source 'clicks' has no column 'usr'", 14),
        ("      clicks:\n", "      clickz:\n", "the job has no source 'clickz'", 7),
        ("      per_user:\n", "      per_usr:\n", "the job writes no sink 'per_usr'", 7),
        ("    given:", "    givn:", "unknown key 'givn'", 5),
        ("    given:", "    mode: bach\n    given:", "unknown mode 'bach'", 11),
    ],
    ids=["column", "source", "sink", "key", "mode"],
)
def test_what_the_job_does_not_have_is_refused_where_it_is_written(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    old: str,
    new: str,
    message: str,
    column: int,
) -> None:
    job = copy_job(tmp_path)
    tests = job.with_name("clicks_per_user.test.yaml")
    text = tests.read_text(encoding="utf-8")
    assert old in text
    tests.write_text(text.replace(old, new, 1), encoding="utf-8")
    first = new.strip().splitlines()[0]
    line = next(i for i, t in enumerate(tests.read_text().splitlines(), 1) if first in t)
    code, out = run(capsys, "test", str(job))
    assert code == 1
    assert f"error[E0830]: {message}" in out
    assert f"--> {tests}:{line}:{column}" in out


def test_an_updating_sink_needs_a_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "job.flow").write_text(
        "SET max_parallelism = 8;\n"
        "CREATE SOURCE s (k STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console', mode = 'update');\n"
        "INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n;\n",
        encoding="utf-8",
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "job.test.yaml").write_text(
        "tests:\n  - name: t\n    given:\n      s: [{k: a}]\n"
        "    expect:\n      o: [{k: a, n: 1}]\n",
        encoding="utf-8",
    )
    code, out = run(capsys, "test", str(tmp_path))
    assert code == 1
    assert "sink 'o' is updated (update mode): say which columns identify a row" in out
    assert f"--> {tmp_path / 'job.test.yaml'}:6:7" in out


def test_plans_are_locked_compared_and_updated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = copy_job(tmp_path)
    code, out = run(capsys, "test", "--plans", str(tmp_path))
    assert code == 1 and "no locked jobgraph plan" in out
    code, out = run(capsys, "test", "--plans", str(tmp_path), "--update")
    assert code == 0 and out.count("UPDATED ") == 4
    assert sorted(p.name for p in (tmp_path / "__plans__").iterdir()) == [
        f"clicks_per_user.{s}.json"
        for s in ("jobgraph", "physical", "streamgraph", "transformations")
    ]
    assert run(capsys, "test", "--plans", str(tmp_path))[0] == 0
    job.write_text(job.read_text().replace("parallelism = 8", "parallelism = 6"), encoding="utf-8")
    code, out = run(capsys, "test", "--plans", str(tmp_path))
    assert code == 1 and "FAIL " in out and "the jobgraph plan changed" in out
    assert '-      "parallelism": 8,' in out and '+      "parallelism": 6,' in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["test"]) == 2
    assert main(["test", str(tmp_path / "missing.flow")]) == 2
    (tmp_path / "lonely.flow").write_text("", encoding="utf-8")
    assert main(["test", str(tmp_path / "lonely.flow")]) == 2
    assert main(["test", str(tmp_path)]) == 2
    assert "no *.test.yaml files under it" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("written", "held", "equal"),
    [
        (25, Decimal("25.00"), True),
        (25.5, Decimal("25.50"), True),
        ("123456789012345.678", Decimal("123456789012345.678"), True),
        ("123456789012345.679", Decimal("123456789012345.678"), False),
        (Decimal("123456789012345.678"), Decimal("123456789012345.678"), True),
        ("2026-03-02T09:00:05", datetime.datetime(2026, 3, 2, 9, 0, 5), True),
        ("2026-03-02 09:00:05.000000", datetime.datetime(2026, 3, 2, 9, 0, 5), True),
        ("2026-03-02 09:00:06", datetime.datetime(2026, 3, 2, 9, 0, 5), False),
        (None, None, True),
        (0, None, False),
        ([1, 2], [1.0, 2.0], True),
    ],
)
def test_values_compare_by_meaning_not_spelling(written: object, held: object, equal: bool) -> None:
    assert (canonical(written) == canonical(held)) is equal


def _given(test: dict[str, Any], source: str) -> list[list[dict[str, Any]]]:
    rows = test["given"][source]
    return rows if rows and isinstance(rows[0], list) else [rows]


def _canonical_rows(rows: list[dict[str, Any]]) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple(sorted((k, canonical(v)) for k, v in r.items())) for r in rows)


def test_the_updating_examples_expect_what_plain_python_computes() -> None:
    """The expected tables of the updating pipelines' examples, written by hand, are Flink's
    final tables of their given rows computed here: each customer's latest change counted
    per country (a country without customers has no row); q4's regular join and WHERE, the
    highest bid per auction, averaged per category."""
    checked = 0
    for name, sink in (
        ("customers_per_country_streaming", "customers_per_country"),
        ("nexmark_q4", "avg_price_per_category"),
    ):
        file = yaml.safe_load((ROOT / "examples" / f"{name}.test.yaml").read_text("utf-8"))
        for test in file["tests"]:
            if name == "nexmark_q4":
                auctions, bids = _given(test, "auctions"), _given(test, "bids")
                batches = list(zip(auctions, bids, strict=True))
                highest: dict[tuple[int, int], float] = {}
                for auction, category, price in flink_join(batches):
                    highest[auction, category] = max(price, highest.get((auction, category), price))
                finals: dict[int, list[float]] = {}
                for (_, category), price in highest.items():
                    finals.setdefault(category, []).append(price)
                want = [{"category": c, "avg_final": sum(p) / len(p)} for c, p in finals.items()]
            else:
                latest: dict[int, dict[str, Any]] = {}
                for row in (r for batch in _given(test, "customer_changes") for r in batch):
                    old = latest.get(row["customer_id"])
                    if old is None or row["updated_at"] > old["updated_at"]:
                        latest[row["customer_id"]] = row
                countries: dict[str, list[str]] = {}
                for row in latest.values():
                    countries.setdefault(row["country"], []).append(row["updated_at"])
                want = [
                    {"country": c, "customers": len(t), "last_change": max(t)}
                    for c, t in countries.items()
                ]
            assert _canonical_rows(test["expect"][sink]) == _canonical_rows(want), test["name"]
            checked += 1
    assert checked == 4


def test_a_wrong_row_of_an_updating_pipelines_table_fails(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A streaming test of an updating pipeline compares the upsert table the test's sink
    holds after the last micro-batch: a wrong count fails, showing the row the table holds,
    and nothing of the country the pipeline deleted."""
    job = copy_job(tmp_path, "customers_per_country_streaming")
    tests = job.with_name("customers_per_country_streaming.test.yaml")
    text = tests.read_text(encoding="utf-8")
    streaming = text[: text.index("  - name:", text.index("(streaming)"))]  # its test only
    assert "mode: streaming" in streaming and "mode: batch" not in streaming
    tests.write_text(
        streaming.replace("{country: DE, customers: 2,", "{country: DE, customers: 3,"),
        encoding="utf-8",
    )
    code, out = run(capsys, "test", str(job))
    assert code == 1, out
    missing = out.split("expected but not written (1):")[1].split("written but not expected")[0]
    unexpected = out.split("written but not expected (1):")[1]
    assert "DE      | 3         | 2026-03-01 09:01:00" in missing
    assert "DE      | 2         | 2026-03-01 09:01:00" in unexpected
    assert "FR" not in unexpected  # deleted from the table in the second micro-batch
    assert out.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_an_upsert_key_that_does_not_identify_a_row_fails_as_the_job_does(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The test's upsert sink is written as flowc run writes it: two rows of one micro-batch
    with one key fail the test with the sink's E0806 at the INSERT, as they fail the job
    (a memory sink kept either row, and the test passed on it)."""
    job = tmp_path / "dup.flow"
    job.write_text(
        "CREATE SOURCE s (k STRING, g STRING) WITH (connector = 'files', path = 'in', "
        "format = 'json');\n"
        "CREATE SINK o WITH (connector = 'postgres', database = 'd', table = 't', key = 'k', "
        "mode = 'update');\n"
        "INSERT INTO o FROM s |> KEY BY k, g |> AGGREGATE count(*) AS n;\n",
        encoding="utf-8",
    )
    (tmp_path / "in").mkdir()
    rows = [{"k": "a", "g": "x"}, {"k": "a", "g": "y"}]
    test = {"name": "one key, two rows", "given": {"s": rows}, "expect": {"o": rows[1:]}}
    job.with_name("dup.test.yaml").write_text(yaml.safe_dump({"tests": [test]}), "utf-8")
    code, out = run(capsys, "test", str(job))
    assert code == 1, out
    assert "error[E0806]: query 'o' failed: sink 'o': two rows of micro-batch 0 have the key" in out
    assert "dup.flow:3:1" in out
    assert out.strip().splitlines()[-1] == "0 passed, 1 failed"
