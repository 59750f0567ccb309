"""Batch mode without Spark's streaming rules (issue 28): every aggregate, TOP, JOIN and
chain of them runs as a Spark batch job over the bounded input, and its result is the
final result of Flink's execution, computed here in plain Python (an unwindowed
aggregate's final result is its last value per key). Where streaming runs the shape
today, its final result over the same input is the batch result too.

Input files are written one per micro-batch with increasing modification times.
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError, Severity
from flowc.runtime.run import RunReport, run_job
from tests.helpers.files import at, write_batches

HEADER = """
SET parallelism = 2;
SET max_parallelism = 16;
SET execution.mode = {mode};
CREATE SOURCE customers (customer_id BIGINT, country STRING, spend BIGINT, updated_at TIMESTAMP)
  WITH (connector = 'files', path = 'customers', format = 'json');
CREATE SOURCE orders (customer_id BIGINT, amount BIGINT, ordered_at TIMESTAMP,
  WATERMARK FOR ordered_at AS ordered_at - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'orders', format = 'json');
"""

# Customers change country and spend over three micro-batches; customer 4 once only.
CUSTOMERS = [
    [
        {"customer_id": 1, "country": "FR", "spend": 10, "updated_at": at(0)},
        {"customer_id": 2, "country": "FR", "spend": 20, "updated_at": at(1)},
        {"customer_id": 3, "country": "DE", "spend": 30, "updated_at": at(2)},
        {"customer_id": 4, "country": "IT", "spend": 5, "updated_at": at(3)},
    ],
    [
        {"customer_id": 1, "country": "DE", "spend": 11, "updated_at": at(60)},
        {"customer_id": 2, "country": "FR", "spend": 21, "updated_at": at(61)},
        {"customer_id": 3, "country": "DE", "spend": 31, "updated_at": at(62)},
    ],
    [
        {"customer_id": 2, "country": "ES", "spend": 22, "updated_at": at(120)},
        {"customer_id": 1, "country": "FR", "spend": 9, "updated_at": at(30)},  # older: ignored
        {"customer_id": 1, "country": "DE", "spend": 11, "updated_at": at(60)},  # a duplicate
    ],
]

ORDERS = [
    [
        {"customer_id": c, "amount": 10 * c + i, "ordered_at": at(20 * i + c)}
        for c in (1, 2, 3)
        for i in range(3)
    ],
    [{"customer_id": c, "amount": 5 + c, "ordered_at": at(100 + c)} for c in (1, 2, 5)],
]


def customers() -> list[dict[str, Any]]:
    return [
        {**r, "updated_at": datetime.fromisoformat(r["updated_at"])}
        for batch in CUSTOMERS
        for r in batch
    ]


def orders() -> list[dict[str, Any]]:
    return [
        {**r, "ordered_at": datetime.fromisoformat(r["ordered_at"])}
        for batch in ORDERS
        for r in batch
    ]


def latest_per_customer() -> dict[int, dict[str, Any]]:
    """TOP 1 BY updated_at DESC PER customer_id: the newest row of each customer."""
    latest: dict[int, dict[str, Any]] = {}
    for row in customers():
        kept = latest.get(row["customer_id"])
        if kept is None or row["updated_at"] > kept["updated_at"]:
            latest[row["customer_id"]] = row
    return latest


def setup(tmp_path: Path) -> None:
    write_batches(tmp_path / "customers", CUSTOMERS)
    write_batches(tmp_path / "orders", ORDERS)


def run(tmp_path: Path, program: str, *, name: str = "job.flow") -> RunReport:
    flow = tmp_path / name
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    for query in report.queries:
        assert query.error is None, query.error
    return report


def json_rows(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for part in sorted(folder.glob("part-*.json"))
        for line in part.read_text().splitlines()
        if line
    ]


def upsert_table(folder: Path) -> list[dict[str, Any]]:
    """A files upsert sink's table: the version its _current file names."""
    current = json.loads((folder / "_current").read_text())
    return json_rows(folder / current["version"])


def rows_of(rows: list[dict[str, Any]], *columns: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


def files_sink(name: str, path: str) -> str:
    return f"CREATE SINK {name} WITH (connector = 'files', path = '{path}', format = 'json');\n"


def upsert_sink(name: str, path: str, key: str) -> str:
    return (
        f"CREATE SINK {name} WITH (connector = 'files', path = '{path}', format = 'json', "
        f"mode = 'update', key = '{key}');\n"
    )


# ---------------------------------------------------------------- the shapes

AGGREGATE = "FROM customers |> KEY BY customer_id |> AGGREGATE count(*) AS n, sum(spend) AS total"


def expected_aggregate() -> list[tuple[Any, ...]]:
    n: Counter[int] = Counter()
    total: Counter[int] = Counter()
    for row in customers():
        n[row["customer_id"]] += 1
        total[row["customer_id"]] += row["spend"]
    return sorted((k, n[k], total[k]) for k in n)


def test_unwindowed_aggregate(tmp_path: Path) -> None:
    """Batch into a files sink (E0704 in streaming) and into an upsert sink (E0433 was),
    both the last value per key; streaming into an upsert sink ends with the same table."""
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch")
        + files_sink("a", "out/a")
        + upsert_sink("u", "out/u", "customer_id")
        + f"INSERT INTO a {AGGREGATE};\nINSERT INTO u {AGGREGATE};\n"
    )
    run(tmp_path, program)
    columns = ("customer_id", "n", "total")
    assert rows_of(json_rows(tmp_path / "out/a"), *columns) == expected_aggregate()
    assert rows_of(upsert_table(tmp_path / "out/u"), *columns) == expected_aggregate()
    streaming = HEADER.format(mode="streaming") + upsert_sink("s", "out/s", "customer_id")
    run(tmp_path, streaming + f"INSERT INTO s {AGGREGATE};\n", name="streaming.flow")
    assert rows_of(upsert_table(tmp_path / "out/s"), *columns) == expected_aggregate()


CDC = (
    "FROM customers |> TOP 1 BY updated_at DESC PER customer_id "
    "|> KEY BY country |> AGGREGATE count(*) AS customers"
)


def expected_cdc() -> list[tuple[Any, ...]]:
    per_country = Counter(row["country"] for row in latest_per_customer().values())
    return sorted(per_country.items())


def test_cdc_job_top_then_aggregate(tmp_path: Path) -> None:
    """The CDC job: the latest row per customer, then customers per country, into a files
    sink and an upsert sink."""
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch")
        + files_sink("a", "out/a")
        + upsert_sink("u", "out/u", "country")
        + f"INSERT INTO a {CDC};\nINSERT INTO u {CDC};\n"
    )
    run(tmp_path, program)
    assert rows_of(json_rows(tmp_path / "out/a"), "country", "customers") == expected_cdc()
    assert rows_of(upsert_table(tmp_path / "out/u"), "country", "customers") == expected_cdc()


def test_cdc_job_row_number_form(tmp_path: Path) -> None:
    """The same job written in SQL with ROW_NUMBER: the same rows."""
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch")
        + files_sink("a", "out/a")
        + """INSERT INTO a
  SELECT country, count(*) AS customers
  FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY updated_at DESC) AS rn
        FROM customers)
  WHERE rn = 1
  GROUP BY country;
"""
    )
    run(tmp_path, program)
    assert rows_of(json_rows(tmp_path / "out/a"), "country", "customers") == expected_cdc()


TOP_N = "FROM customers |> TOP 2 BY spend DESC PER country AS place"


def expected_top_n() -> list[tuple[Any, ...]]:
    by_country: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in customers():
        by_country[row["country"]].append(row)
    result = []
    for country, rows in by_country.items():
        ranked = sorted(rows, key=lambda r: (r["spend"], r["customer_id"]), reverse=True)
        result += [(country, r["customer_id"], r["spend"], i + 1) for i, r in enumerate(ranked[:2])]
    return sorted(result)


def test_top_n(tmp_path: Path) -> None:
    """Top-N over every row (E0704 in streaming append); streaming into an upsert sink
    keyed by group and rank ends with the same table."""
    setup(tmp_path)
    program = HEADER.format(mode="batch") + files_sink("a", "out/a") + f"INSERT INTO a {TOP_N};\n"
    run(tmp_path, program)
    columns = ("country", "customer_id", "spend", "place")
    assert rows_of(json_rows(tmp_path / "out/a"), *columns) == expected_top_n()
    streaming = HEADER.format(mode="streaming") + upsert_sink("s", "out/s", "country, place")
    run(tmp_path, streaming + f"INSERT INTO s {TOP_N};\n", name="streaming.flow")
    assert rows_of(upsert_table(tmp_path / "out/s"), *columns) == expected_top_n()


NESTED = (
    "FROM customers |> KEY BY customer_id |> AGGREGATE count(*) AS n "
    "|> KEY BY n |> AGGREGATE count(*) AS customers"
)


def test_aggregate_of_an_aggregate(tmp_path: Path) -> None:
    """E0702/E0704 in streaming; batch: the final counts' histogram."""
    setup(tmp_path)
    program = HEADER.format(mode="batch") + files_sink("a", "out/a") + f"INSERT INTO a {NESTED};\n"
    run(tmp_path, program)
    histogram = Counter(n for _, n, _ in expected_aggregate())
    assert rows_of(json_rows(tmp_path / "out/a"), "n", "customers") == sorted(histogram.items())


DEDUPLICATED = (
    "FROM customers |> DEDUPLICATE ON customer_id, country, spend, updated_at "
    "|> KEY BY customer_id |> AGGREGATE count(*) AS n"
)


def test_deduplicate_then_aggregate(tmp_path: Path) -> None:
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch") + files_sink("a", "out/a") + f"INSERT INTO a {DEDUPLICATED};\n"
    )
    run(tmp_path, program)
    distinct = {tuple(sorted(r.items())) for r in customers()}
    expected = sorted(Counter(dict(r)["customer_id"] for r in distinct).items())
    assert rows_of(json_rows(tmp_path / "out/a"), "customer_id", "n") == expected
    streaming = HEADER.format(mode="streaming") + upsert_sink("s", "out/s", "customer_id")
    run(tmp_path, streaming + f"INSERT INTO s {DEDUPLICATED};\n", name="streaming.flow")
    assert rows_of(upsert_table(tmp_path / "out/s"), "customer_id", "n") == expected


WINDOWED_THEN_ALL = (
    "FROM orders |> KEY BY customer_id |> WINDOW TUMBLE(ordered_at, INTERVAL 1 MINUTE) "
    "|> AGGREGATE sum(amount) AS amount |> KEY BY customer_id "
    "|> AGGREGATE count(*) AS windows, max(amount) AS best"
)


def test_window_aggregate_then_unwindowed_aggregate(tmp_path: Path) -> None:
    """Every window, the last ones too (streaming leaves them open), then per customer."""
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch")
        + files_sink("a", "out/a")
        + f"INSERT INTO a {WINDOWED_THEN_ALL};\n"
    )
    run(tmp_path, program)
    windows: Counter[tuple[int, datetime]] = Counter()
    for row in orders():
        windows[(row["customer_id"], row["ordered_at"].replace(second=0))] += row["amount"]
    per_customer: dict[int, list[int]] = defaultdict(list)
    for (customer, _), amount in windows.items():
        per_customer[customer].append(amount)
    expected = sorted((c, len(a), max(a)) for c, a in per_customer.items())
    assert rows_of(json_rows(tmp_path / "out/a"), "customer_id", "windows", "best") == expected


JOINED = (
    "FROM orders |> JOIN customers ON orders.customer_id = customers.customer_id "
    "|> SELECT orders.customer_id AS customer_id, amount, spend "
    "|> KEY BY customer_id |> AGGREGATE count(*) AS n, sum(amount) AS amount"
)


def test_join_then_aggregate(tmp_path: Path) -> None:
    """An inner join of every row on both sides (a regular join), then per customer;
    streaming into an upsert sink ends with the same table."""
    setup(tmp_path)
    program = HEADER.format(mode="batch") + files_sink("a", "out/a") + f"INSERT INTO a {JOINED};\n"
    run(tmp_path, program)
    n: Counter[int] = Counter()
    amount: Counter[int] = Counter()
    for order in orders():
        for customer in customers():
            if customer["customer_id"] == order["customer_id"]:
                n[order["customer_id"]] += 1
                amount[order["customer_id"]] += order["amount"]
    expected = sorted((c, n[c], amount[c]) for c in n)
    assert rows_of(json_rows(tmp_path / "out/a"), "customer_id", "n", "amount") == expected
    streaming = HEADER.format(mode="streaming") + upsert_sink("s", "out/s", "customer_id")
    run(tmp_path, streaming + f"INSERT INTO s {JOINED};\n", name="streaming.flow")
    assert rows_of(upsert_table(tmp_path / "out/s"), "customer_id", "n", "amount") == expected


# ---------------------------------------------------------------- how sinks write


def test_files_sink_replaces_the_previous_output(tmp_path: Path) -> None:
    """A second batch run writes the final result again, in place of the first's, not
    beside it; a run that fails leaves the previous output whole."""
    setup(tmp_path)
    program = (
        HEADER.format(mode="batch") + files_sink("a", "out/a") + f"INSERT INTO a {AGGREGATE};\n"
    )
    run(tmp_path, program)
    first = sorted((tmp_path / "out/a").glob("part-*.json"))
    run(tmp_path, program)
    assert rows_of(json_rows(tmp_path / "out/a"), "customer_id", "n", "total") == (
        expected_aggregate()
    )
    assert not set(first) & set((tmp_path / "out/a").glob("part-*.json"))
    failing = program.replace(
        "AGGREGATE count(*) AS n, sum(spend) AS total",
        "AGGREGATE count(*) AS n, sum(spend) AS total "
        "|> SELECT customer_id, n, CAST(CAST(total AS STRING) || 'x' AS BIGINT) AS total",
    )
    flow = tmp_path / "failing.flow"
    flow.write_text(failing, encoding="utf-8")
    job = flowc.compile(failing, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert report.queries[0].error is not None
    assert rows_of(json_rows(tmp_path / "out/a"), "customer_id", "n", "total") == (
        expected_aggregate()
    )
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["a"]


def test_upsert_sink_upserts_the_batch_result_by_key(tmp_path: Path) -> None:
    """A batch run upserts its result: keys it writes are replaced, others kept."""
    write_batches(tmp_path / "customers", CUSTOMERS[:1])
    write_batches(tmp_path / "orders", ORDERS)
    program = (
        HEADER.format(mode="batch")
        + upsert_sink("u", "out/u", "customer_id")
        + f"INSERT INTO u {AGGREGATE} |> WHERE customer_id <> 4;\n"
    )
    run(tmp_path, program.replace("customer_id <> 4", "TRUE"))
    (tmp_path / "customers").rename(tmp_path / "first")
    write_batches(tmp_path / "customers", CUSTOMERS)
    run(tmp_path, program)
    table = rows_of(upsert_table(tmp_path / "out/u"), "customer_id", "n", "total")
    assert table == sorted([r for r in expected_aggregate() if r[0] != 4] + [(4, 1, 5)])


def test_two_inserts_into_one_sink_are_still_refused_in_batch() -> None:
    program = (
        HEADER.format(mode="batch")
        + files_sink("a", "out/a")
        + (f"INSERT INTO a {AGGREGATE};\nINSERT INTO a {AGGREGATE};\n")
    )
    with pytest.raises(CompileError) as raised:
        flowc.compile(program, "two.flow", for_spark=True)
    errors = [d for d in raised.value.diagnostics if d.severity is Severity.ERROR]
    assert [str(d.code) for d in errors] == ["E0726"]


# ---------------------------------------------------------------- the shipped example

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_cdc_example_runs_with_flowc_run_batch(tmp_path: Path, spark: Any) -> None:
    """``flowc run --batch examples/customers_per_country.flow`` on its shipped data:
    customers per country of each customer's latest change, as plain Python counts them."""
    import shutil

    from flowc.cli.main import main

    shutil.copytree(EXAMPLES / "data" / "customers", tmp_path / "data" / "customers")
    flow = tmp_path / "customers_per_country.flow"
    shutil.copy(EXAMPLES / "customers_per_country.flow", flow)
    assert main(["run", str(flow), "--batch"]) == 0
    latest: dict[int, tuple[str, str]] = {}
    for path in sorted((tmp_path / "data" / "customers").glob("*.json")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            kept = latest.get(row["customer_id"])
            if kept is None or row["updated_at"] > kept[0]:
                latest[row["customer_id"]] = (row["updated_at"], row["country"])
    expected = sorted(Counter(country for _, country in latest.values()).items())
    written = json_rows(tmp_path / "out" / "customers_per_country")
    assert rows_of(written, "country", "customers") == expected


WINDOWED_JOB = """SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'clicks', format = 'json');
CREATE SINK per_minute WITH (connector = 'files', path = 'out/per_minute', format = 'json');
INSERT INTO per_minute FROM clicks |> KEY BY user_id |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS clicks;
"""

WINDOWED_TEST = """tests:
  - name: every window, the last one too
    mode: batch
    given:
      clicks:
        - - {user_id: a, ts: "2026-03-02 09:00:05"}
          - {user_id: a, ts: "2026-03-02 09:00:30"}
        - - {user_id: a, ts: "2026-03-02 09:02:10"}
    expect:
      per_minute:
        - {user_id: a, clicks: 2}
        - {user_id: a, clicks: 1}
"""


def test_flowc_test_runs_a_test_in_batch_mode(tmp_path: Path, spark: Any) -> None:
    """``mode: batch`` runs a streaming job's test as flowc run --batch: the window still
    open at the end of the rows is written too; without the key the test runs in the
    job's own (streaming) mode, where that window is not written, and fails."""
    from flowc.cli.main import main

    (tmp_path / "clicks.flow").write_text(WINDOWED_JOB, encoding="utf-8")
    tests = tmp_path / "clicks.test.yaml"
    tests.write_text(WINDOWED_TEST, encoding="utf-8")
    assert main(["test", str(tests)]) == 0
    tests.write_text(WINDOWED_TEST.replace("    mode: batch\n", ""), encoding="utf-8")
    assert main(["test", str(tests)]) == 1


def test_flowc_test_runs_the_cdc_example_in_batch_mode(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example's test passes; the same expectations fail when the batch result differs
    from them; ``mode: streaming`` runs it as flowc run would, which refuses it (E0704)."""
    import shutil

    from flowc.cli.main import main

    flow = tmp_path / "customers_per_country.flow"
    shutil.copy(EXAMPLES / "customers_per_country.flow", flow)
    tests = tmp_path / "customers_per_country.test.yaml"
    text = (EXAMPLES / "customers_per_country.test.yaml").read_text(encoding="utf-8")
    tests.write_text(text, encoding="utf-8")
    assert main(["test", str(tests)]) == 0
    tests.write_text(text.replace("{country: DE, customers: 2}", "{country: DE, customers: 1}"))
    assert main(["test", str(tests)]) == 1
    tests.write_text(text.replace("mode: batch", "mode: streaming"))
    assert main(["test", str(tests)]) == 1
    assert "error[E0704]" in capsys.readouterr().out
