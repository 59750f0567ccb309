"""MATCH_RECOGNIZE (issue 28, item 2): the documented subset's meaning, held by a port of
Flink's CEP rules in plain Python (tests/helpers/match_recognize.py) checked against
PyFlink 2.3's rows; flowc itself still refuses the clause (E0759) until its processor
runs it on Spark (docs/language.md, "MATCH_RECOGNIZE")."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest

import flowc
from flowc.diagnostics import CompileError, Severity
from flowc.spark.match_runtime import (
    Condition,
    MatchContext,
    MatchPath,
    MatchState,
    compile_pattern,
    match_feed,
    match_first,
    match_last,
    match_new_state,
    match_rows,
)
from flowc.sql.flink_dialect import code_only
from flowc.sql.match_recognize import read_match_recognize
from flowc.state import Verdict, compare, describe_state
from tests.helpers.flink import COLLECT_CHANGELOG, ask_flink, requires_flink
from tests.helpers.match_recognize import (
    Context,
    Emitted,
    Variable,
    find_matches,
    in_time_order,
)


def _price(test: Callable[[int], bool]) -> Callable[[Context], bool]:
    return lambda context: test(int(str(context.row["price"])))


def _against_prev(compare: Callable[[int, int], bool]) -> Callable[[Context], object]:
    """``price <op> PREV(price)``: NULL (so false) on a match's first row."""

    def check(context: Context) -> object:
        before = context.prev("price")
        if before is None:
            return None
        return compare(int(str(context.row["price"])), int(str(before)))

    return check


def _down(now: int, before: int) -> bool:
    return now < before


def _up(now: int, before: int) -> bool:
    return now > before


def _java_avg(values: list[int]) -> int | None:
    """Flink's AVG of INT: an INT, the sum divided by the count truncated toward zero."""
    if not values:
        return None
    total = sum(values)
    return abs(total) // len(values) * (1 if total >= 0 else -1)


def _number(value: object) -> int:
    return int(str(value))


def _below_a_avg_under_14(context: Context) -> bool:
    """``B.price < A.price AND AVG(B.price) < 14``: B's rows with the current one (Flink's
    INT average, truncated)."""
    prices = [_number(r["price"]) for r in context.rows_of("B")]
    average = _java_avg(prices)
    return _number(context.row["price"]) < _number(context.last("A", "price")) and (
        average is not None and average < 14
    )


def _below_a(context: Context) -> bool:
    return _number(context.row["price"]) < _number(context.last("A", "price"))


def _above_a(context: Context) -> bool:
    return _number(context.row["price"]) > _number(context.last("A", "price"))


#: name: (PATTERN, DEFINE, AFTER MATCH SKIP, the port's pattern). Each is of Flink's
#: documented kind and runs on Flink 2.3 (a greedy last variable and PREV(B.price) do not).
CASES: dict[str, tuple[str, str, str, list[Variable]]] = {
    "v_shape_past_last": (
        "A B+ C",
        "B AS price < PREV(price), C AS price > PREV(price)",
        "PAST LAST ROW",
        [
            Variable("A"),
            Variable("B", 1, None, True, _against_prev(_down)),
            Variable("C", condition=_against_prev(_up)),
        ],
    ),
    "v_shape_next_row": (
        "A B+ C",
        "B AS price < PREV(price), C AS price > PREV(price)",
        "TO NEXT ROW",
        [
            Variable("A"),
            Variable("B", 1, None, True, _against_prev(_down)),
            Variable("C", condition=_against_prev(_up)),
        ],
    ),
    "optional_middle": (
        "A B? C",
        "A AS price > 15, B AS price < 15, C AS price > 12",
        "PAST LAST ROW",
        [
            Variable("A", condition=_price(lambda p: p > 15)),
            Variable("B", 0, 1, True, _price(lambda p: p < 15)),
            Variable("C", condition=_price(lambda p: p > 12)),
        ],
    ),
    "optional_first": (
        "A? B",
        "A AS price < 15, B AS price > 12",
        "PAST LAST ROW",
        [
            Variable("A", 0, 1, True, _price(lambda p: p < 15)),
            Variable("B", condition=_price(lambda p: p > 12)),
        ],
    ),
    "range_greedy": (
        "A{2,3} B",
        "A AS price < 14, B AS price >= 14",
        "TO NEXT ROW",
        [
            Variable("A", 2, 3, True, _price(lambda p: p < 14)),
            Variable("B", condition=_price(lambda p: p >= 14)),
        ],
    ),
    "range_greedy_overlapping": (
        "A{2,3} B",
        "A AS price < 16, B AS price > 12",
        "TO NEXT ROW",
        [
            Variable("A", 2, 3, True, _price(lambda p: p < 16)),
            Variable("B", condition=_price(lambda p: p > 12)),
        ],
    ),
    "exactly": (
        "A{2} B",
        "A AS price >= 11, B AS price > 14",
        "TO NEXT ROW",
        [
            Variable("A", 2, 2, True, _price(lambda p: p >= 11)),
            Variable("B", condition=_price(lambda p: p > 14)),
        ],
    ),
    "plus_greedy_overlapping": (
        "A+ B",
        "A AS price < 16, B AS price > 12",
        "PAST LAST ROW",
        [
            Variable("A", 1, None, True, _price(lambda p: p < 16)),
            Variable("B", condition=_price(lambda p: p > 12)),
        ],
    ),
    "define_reads_other_rows": (
        "A B+ C",
        "A AS price > 12, B AS B.price < A.price AND AVG(B.price) < 14, C AS C.price > A.price",
        "TO NEXT ROW",
        [
            Variable("A", condition=_price(lambda p: p > 12)),
            Variable("B", 1, None, True, _below_a_avg_under_14),
            Variable("C", condition=_above_a),
        ],
    ),
    "define_reads_other_rows_past_last": (
        "A B+ C",
        "A AS price > 12, B AS B.price < A.price AND AVG(B.price) < 14, C AS C.price > A.price",
        "PAST LAST ROW",
        [
            Variable("A", condition=_price(lambda p: p > 12)),
            Variable("B", 1, None, True, _below_a_avg_under_14),
            Variable("C", condition=_above_a),
        ],
    ),
    "held_until_earlier_ends": (
        "A B+ C",
        "A AS price > 12, B AS B.price < A.price, C AS C.price > A.price",
        "PAST LAST ROW",
        [
            Variable("A", condition=_price(lambda p: p > 12)),
            Variable("B", 1, None, True, _below_a),
            Variable("C", condition=_above_a),
        ],
    ),
    "star": (
        "A* B",
        "A AS price < 14, B AS price >= 14",
        "PAST LAST ROW",
        [
            Variable("A", 0, None, True, _price(lambda p: p < 14)),
            Variable("B", condition=_price(lambda p: p >= 14)),
        ],
    ),
    "at_least": (
        "A{2,} B",
        "A AS price < 14, B AS price >= 14",
        "TO NEXT ROW",
        [
            Variable("A", 2, None, True, _price(lambda p: p < 14)),
            Variable("B", condition=_price(lambda p: p >= 14)),
        ],
    ),
    "reluctant": (
        "A+? B",
        "A AS price >= 11, B AS price > 14",
        "PAST LAST ROW",
        [
            Variable("A", 1, None, False, _price(lambda p: p >= 11)),
            Variable("B", condition=_price(lambda p: p > 14)),
        ],
    ),
}

DDL = """CREATE TABLE t (symbol STRING, rowtime TIMESTAMP(3), price INT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""


def _measures(names: list[str]) -> str:
    """Each variable's COUNT, FIRST time, LAST price and AVG price, and MATCH_ROWTIME()."""
    parts = []
    for v in names:
        parts += [
            f"COUNT({v}.price) AS {v}_n",
            f"CAST(FIRST({v}.rowtime) AS STRING) AS {v}_first",
            f"LAST({v}.price) AS {v}_last",
            f"AVG({v}.price) AS {v}_avg",
        ]
    return ", ".join([*parts, "CAST(MATCH_ROWTIME() AS STRING) AS mrt"])


def _query(pattern: str, define: str, skip: str, names: list[str]) -> str:
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime "
        f"MEASURES {_measures(names)} ONE ROW PER MATCH AFTER MATCH SKIP {skip} "
        f"PATTERN ({pattern}) DEFINE {define}) AS T"
    )


def _expected_row(symbol: str, emitted: Emitted, names: list[str]) -> list[object]:
    """The query's row: MATCH_ROWTIME() is the time of the row that emitted the match."""
    match = emitted.rows
    out: list[object] = [symbol]
    for v in names:
        rows = match.get(v, [])
        prices = [int(str(r["price"])) for r in rows]
        out += [
            len(rows),
            str(rows[0]["rowtime"]) if rows else None,
            prices[-1] if prices else None,
            _java_avg(prices),
        ]
    return [*out, str(emitted.at["rowtime"])]


def _rows(seed: int) -> list[dict[str, object]]:
    """Three symbols' prices as random walks over one minute, one row a second each, in
    time order across symbols (so no row is late whenever Flink's periodic watermark
    comes)."""
    rng = random.Random(seed)
    price = {"ACME": 12, "BETA": 12, "GAMMA": 12}
    rows: list[dict[str, object]] = []
    for second in range(60):
        for symbol in price:
            price[symbol] = max(5, min(22, price[symbol] + rng.randint(-3, 3)))
            rows.append(
                {
                    "symbol": symbol,
                    "rowtime": f"2024-01-01 10:00:{second:02d}.000",
                    "price": price[symbol],
                }
            )
    return rows


FLINK_SCRIPT = r"""
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
asked = json.loads(sys.argv[1])
out = {}
for name, query in asked["queries"].items():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    env.execute_sql(asked["ddl"])
    with env.execute_sql(query).collect() as rows:
        out[name] = [[str(r.get_row_kind())] + [None if x is None else str(x) for x in r]
                     for r in rows]
print(json.dumps(out))
"""


def _port(case: str, rows: list[dict[str, object]]) -> list[list[object]]:
    _, _, skip, pattern = CASES[case]
    names = [v.name for v in pattern]
    expected = []
    for key, key_rows in in_time_order(rows, ["symbol"], "rowtime").items():
        for match in find_matches(pattern, key_rows, skip):
            expected.append(_expected_row(key, match, names))
    return expected


def test_a_greedy_loop_before_an_overlapping_variable_never_ends() -> None:
    """Flink's greedy loop takes every row its condition holds for: B after ``A+`` must
    fail A's condition, so where every row is an A nothing matches; reluctant ``A+?``
    ends at the first B."""
    rows = [
        {"symbol": "K", "rowtime": f"t{i:02d}", "price": p}
        for i, p in enumerate([12, 17, 13, 11, 16, 14])
    ]
    greedy = [
        Variable("A", 1, None, True, _price(lambda p: p >= 9)),
        Variable("B", condition=_price(lambda p: p > 14)),
    ]
    assert find_matches(greedy, rows, "PAST LAST ROW") == []
    reluctant = [Variable("A", 1, None, False, _price(lambda p: p >= 9)), greedy[1]]
    matches = find_matches(reluctant, rows, "PAST LAST ROW")
    assert [[r["price"] for r in m.rows["A"]] + [m.rows["B"][0]["price"]] for m in matches] == [
        [12, 17],
        [13, 11, 16],
    ]


def test_skip_to_next_row_finds_overlapping_matches_past_last_row_does_not() -> None:
    rows = [
        {"symbol": "K", "rowtime": f"t{i:02d}", "price": p}
        for i, p in enumerate([20, 15, 18, 12, 16])
    ]
    pattern = CASES["v_shape_next_row"][3]
    past = find_matches(pattern, rows, "PAST LAST ROW")
    following = find_matches(pattern, rows, "TO NEXT ROW")
    assert [[r["price"] for rs in m.rows.values() for r in rs] for m in past] == [[20, 15, 18]]
    assert [[r["price"] for rs in m.rows.values() for r in rs] for m in following] == [
        [20, 15, 18],
        [18, 12, 16],
    ]


def test_a_completed_match_waits_for_an_earlier_partial_one() -> None:
    """15 10 17 completes first, but the match from 20 is still open: it waits, and when 20
    ... 22 completes, that one is emitted and SKIP PAST LAST ROW prunes the later one."""
    rows = [
        {"symbol": "K", "rowtime": f"t{i:02d}", "price": p}
        for i, p in enumerate([20, 15, 10, 17, 22])
    ]
    matches = find_matches(CASES["held_until_earlier_ends"][3], rows, "PAST LAST ROW")
    assert [[r["price"] for rs in m.rows.values() for r in rs] for m in matches] == [
        [20, 15, 10, 17, 22]
    ]
    assert matches[0].at["price"] == 22


def test_rows_behind_the_watermark_are_dropped() -> None:
    """CepOperator's rule: a row whose time is not after the current watermark is late."""
    rows = [{"symbol": "K", "rowtime": t, "price": 1} for t in ("10:05", "10:04", "10:06")]
    kept = in_time_order(rows, ["symbol"], "rowtime", [None, "10:04", "10:04"])
    assert [r["rowtime"] for r in kept["K"]] == ["10:05", "10:06"]


def test_a_clause_in_the_subset_is_a_match_step_over_its_table() -> None:
    """The clause becomes a hidden view reading its table through one MatchRecognize step
    (its output the PARTITION BY columns, then the measures, typed as Flink types them),
    and the statement reads that view; each condition is read where it is written."""
    query = (
        "INSERT INTO o SELECT k, a, n FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES A.v AS a, COUNT(B.v) AS n, MATCH_ROWTIME() AS t PATTERN (A B+? C) "
        "DEFINE B AS v < PREV(v) AND k <> 'x', C AS v > FIRST(B.v, 1)) AS T;"
    )
    program = (
        "SET sql.dialect = 'flink';\n"
        "CREATE TABLE src (k STRING, v INT, ts TIMESTAMP(3), "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
        "WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE TABLE o (k STRING, a INT, n BIGINT) "
        "WITH (connector = 'files', path = 'out', format = 'json');\n"
        f"{query}\n"
    )
    job = flowc.compile(program, "job.flow", for_spark=True)
    (view,) = job.program.views
    assert view.name == "src$match"
    (step,) = view.stream.steps
    assert [(c.name, c.type) for c in step.schema] == [
        ("k", "STRING"),
        ("a", "INT"),
        ("n", "BIGINT"),
        ("t", "TIMESTAMP"),
    ]
    node = step.node
    assert [(v.name.value, v.low, v.high, v.greedy) for v in node.variables] == [
        ("A", 1, 1, True),
        ("B", 1, None, False),
        ("C", 1, 1, True),
    ]
    condition = node.variables[1].condition
    assert condition is not None
    start = query.index("v < PREV")
    assert (condition.span.line, condition.span.column) == (4, start + 1)
    assert condition.span.end_column == query.index(", C AS") + 1
    (insert,) = job.program.inserts
    assert [c.name for c in insert.stream.schema] == ["k", "a", "n"]


def _by_key(rows: list[list[object]]) -> dict[object, list[list[object]]]:
    """Each key's rows in their order (Flink emits a key's matches in order; keys interleave
    as its subtask runs them)."""
    grouped: dict[object, list[list[object]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    return grouped


@requires_flink
def test_the_port_gives_flinks_rows(tmp_path: Path) -> None:
    """Every case's rows from PyFlink 2.3 (insert-only, each match's partition column and
    measures) equal the port's, each key's in the same order."""
    rows = _rows(1)
    data = tmp_path / "t.csv"
    data.write_text("".join(f"{r['symbol']},{r['rowtime']},{r['price']}\n" for r in rows))
    queries = {
        case: _query(pattern, define, skip, [v.name for v in variables])
        for case, (pattern, define, skip, variables) in CASES.items()
    }
    answered = ask_flink(FLINK_SCRIPT, {"ddl": DDL.format(path=data), "queries": queries})
    for case in CASES:
        flink = answered[case]
        assert {kind for kind, *_ in flink} <= {"+I"}, case
        expected = [[None if x is None else str(x) for x in row] for row in _port(case, rows)]
        assert _by_key([row[1:] for row in flink]) == _by_key(expected), case
    assert any(answered[case] for case in CASES), "no case matched at all"


def _random_case(rng: random.Random) -> tuple[list[Variable], list[Condition | None], bool]:
    """A random pattern of the subset (Flink's rules: not every variable optional, the last
    one not greedy over a range) and its conditions, for the port and for the engine."""
    quantifiers: list[tuple[int, int | None]] = [
        (1, 1),
        (0, 1),
        (1, None),
        (0, None),
        (2, 2),
        (2, 3),
        (0, 2),
        (2, None),
    ]
    size = rng.randint(1, 4)
    variables: list[Variable] = []
    conditions: list[Condition | None] = []
    for index in range(size):
        low, high = rng.choice(quantifiers)
        greedy = rng.random() < 0.6
        if index == size - 1 and low != high and not (low == 0 and high == 1):
            greedy = False
        kinds = ["none", "above", "below", "down", "up"]
        kind = rng.choice(kinds + ["under_a", "over_a"] * 2 if index else kinds)
        bound = rng.randint(8, 18)
        port, engine = _condition_pair(kind, bound)
        variables.append(Variable(chr(65 + index), low, high, greedy, port))
        conditions.append(engine)
    if rng.random() < 0.3:
        # A, B below A, C above A: a later row's match can complete first and wait.
        low, high = rng.choice([(1, None), (2, None), (1, 3), (0, None)])
        variables, conditions = [], []
        for name, kind, (least, most) in (
            ("A", "above", (1, 1)),
            ("B", "under_a", (low, high)),
            ("C", "over_a", (1, 1)),
        ):
            port, engine = _condition_pair(kind, rng.randint(8, 14))
            variables.append(Variable(name, least, most, rng.random() < 0.7, port))
            conditions.append(engine)
    if all(v.low == 0 for v in variables):
        variables[0] = Variable("A", 1, 1, True, variables[0].condition)
    return variables, conditions, rng.random() < 0.5


def _condition_pair(
    kind: str, bound: int
) -> tuple[Callable[[Context], object] | None, Condition | None]:
    """One condition written for the port (names) and for the engine (positions: price is
    column 1); ``under_a``/``over_a`` compare with A's last price, so matches from later
    rows can complete first and wait."""
    if kind == "none":
        return None, None
    if kind in ("above", "below"):
        above = kind == "above"

        def port(context: Context) -> object:
            price = _number(context.row["price"])
            return price > bound if above else price < bound

        def engine(context: MatchContext) -> object:
            price = _number(context[1][1])
            return price > bound if above else price < bound

        return port, engine
    if kind in ("under_a", "over_a"):
        under = kind == "under_a"

        def port_a(context: Context) -> object:
            a = context.last("A", "price")
            if a is None:
                return None
            price = _number(context.row["price"])
            return price < _number(a) if under else price > _number(a)

        def engine_a(context: MatchContext) -> object:
            a = match_last(context, 0, 1)
            if a is None:
                return None
            price = _number(context[1][1])
            return price < _number(a) if under else price > _number(a)

        return port_a, engine_a
    down = kind == "down"

    def port_prev(context: Context) -> object:
        before = context.prev("price")
        if before is None:
            return None
        now = _number(context.row["price"])
        return now < _number(before) if down else now > _number(before)

    def engine_prev(context: MatchContext) -> object:
        before = match_last(context, -1, 1, 1)
        if before is None:
            return None
        now = _number(context[1][1])
        return now < _number(before) if down else now > _number(before)

    return port_prev, engine_prev


def _rows_held(state: MatchState) -> set[str]:
    """The ids of the rows some partial or waiting match holds: each from its start row
    on, one a row (strict contiguity), as many as its runs count."""
    held = set()
    for _, begins, runs in [*state["partials"], *state["done"]]:
        held |= {str(begins + k) for k in range(sum(count for _, count in runs))}
    return held


def test_the_engine_keeps_the_ports_matches_across_a_restart_after_every_row() -> None:
    """flowc's state machine (compiler/spark/match_runtime.py), its state through JSON
    after every row as a processor keeps it across micro-batches and restarts, emits the
    port's matches in the port's order, for 300 random patterns of the subset over random
    rows (tied matches from one start row among them, in Flink's queue order); after every
    row its state keeps exactly the rows an open or waiting match holds."""
    rng = random.Random(28)
    tied = 0
    for _ in range(300):
        variables, conditions, past_last = _random_case(rng)
        prices = [rng.randint(5, 20) for _ in range(rng.randint(5, 30))]
        tied += _engine_against_port(variables, conditions, past_last, prices)
    assert tied >= 3, tied  # 5 tied emissions in 3 patterns


def _engine_against_port(
    variables: list[Variable],
    conditions: list[Condition | None],
    past_last: bool,
    prices: list[int],
) -> int:
    """Asserts the engine, its state through JSON after every row, emits the port's
    matches in the port's order at the port's rows and keeps exactly the rows its matches
    hold; the number of the port's matches that waited with a tied one."""
    rows = [{"symbol": "K", "rowtime": f"t{i:03d}", "price": p} for i, p in enumerate(prices)]
    skip = "PAST LAST ROW" if past_last else "TO NEXT ROW"
    port = find_matches(variables, rows, skip)
    nfa = compile_pattern([(v.low, v.high, v.greedy) for v in variables])
    state = match_new_state()
    got = []
    for row in rows:
        state = json.loads(json.dumps(state))
        for match in match_feed(nfa, conditions, past_last, state, [row["rowtime"], row["price"]]):
            got.append((sorted((chr(65 + v), str(r[0])) for v, r in match), row["rowtime"]))
        assert set(state["rows"]) == _rows_held(state), (variables, skip, prices)
    want = [
        (sorted((v, str(r["rowtime"])) for v, rs in m.rows.items() for r in rs), m.at["rowtime"])
        for m in port
    ]
    assert got == want, (variables, skip, prices)
    return sum(1 for m in port if m.rivals)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pattern_read_is_the_one_flink_was_asked(case: str) -> None:
    """flowc's reading of each PATTERN Flink answered (the quantifiers the state machine is
    to be built from) is the port's, and none of it is refused."""
    pattern, define, skip, variables = CASES[case]
    query = _query(pattern, define, skip, [v.name for v in variables])
    name = query.index("MATCH_RECOGNIZE")
    read = read_match_recognize(code_only(query), name, name + len("MATCH_RECOGNIZE"))
    assert read.refusals == ()
    assert [(v.name, v.low, v.high) for v in read.pattern] == [
        (v.name, v.low, v.high) for v in variables
    ]
    # Flink's greedy: only quantifiers over a range; ? and {n} are never greedy.
    assert [v.greedy for v in read.pattern] == [v.greedy for v in variables]


@pytest.mark.parametrize(
    ("part", "where"),
    [
        ("PATTERN (A B+) DEFINE B AS price > 1", "B+"),
        ("PATTERN (A B?? C) DEFINE B AS price > 1", "B??"),
        ("PATTERN (A | B) DEFINE B AS price > 1", "|"),
        ("PATTERN (A B) DEFINE B AS B.price < PREV(B.price)", "PREV"),
        ("PATTERN (A B A) DEFINE B AS price > 1", "A) DEFINE"),
    ],
)
def test_a_part_outside_the_subset_is_e0759_at_that_part(part: str, where: str) -> None:
    query = (
        "INSERT INTO o SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        f"MEASURES A.v AS a {part}) AS T;"
    )
    program = (
        "SET sql.dialect = 'flink';\n"
        "CREATE TABLE src (k STRING, v INT, price INT, ts TIMESTAMP(3), "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
        "WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE TABLE o (a INT) WITH (connector = 'files', path = 'out', format = 'json');\n"
        f"{query}\n"
    )
    with pytest.raises(CompileError) as raised:
        flowc.compile(program, "job.flow", for_spark=True)
    found = [d for d in raised.value.diagnostics if d.severity is Severity.ERROR]
    assert [(d.code.value, d.span.line) for d in found] == [("E0759", 4)]
    assert found[0].span.column == query.index(where) + 1, found[0].message
    assert "not run yet" in (found[0].help or "")


def test_any_text_in_the_clause_is_a_located_e0759_never_a_crash() -> None:
    """Reading the clause's parts never fails, whatever follows its name: 150 random
    bodies of its words and signs, unbalanced brackets included, are each E0759 within
    the statement."""
    rng = random.Random(759)
    pieces = [
        *"AB C()|{},?*+^$-0123456789.'",
        "PATTERN",
        "DEFINE",
        "PARTITION BY",
        "ALL ROWS",
        "PER MATCH",
        "SKIP TO",
        "PREV(",
        "NEXT(",
        "RUNNING ",
        "WITHIN",
        "PERMUTE",
        "{-",
        "-}",
        " AS ",
        " ",
    ]
    head = "SET sql.dialect = 'flink';\nCREATE TABLE o (a INT) WITH ('connector' = 'console');\n"
    for _ in range(150):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))).replace("'", "")
        statement = f"INSERT INTO o SELECT * FROM t MATCH_RECOGNIZE ({body}) AS T;"
        with pytest.raises(CompileError) as raised:
            flowc.compile(head + statement + "\n", "job.flow")
        errors = [d for d in raised.value.diagnostics if d.severity is Severity.ERROR]
        assert errors and {d.code.value for d in errors} == {"E0759"}, (body, errors)
        assert all(d.span.line == 3 and d.span.end_column <= len(statement) + 1 for d in errors)


def test_the_clauses_other_parts_are_read_where_they_are_written() -> None:
    """The places the plan is to read: PARTITION BY and ORDER BY items, each measure's
    expression and name, each variable's condition, the skip."""
    case = "define_reads_other_rows"
    pattern, define, skip, variables = CASES[case]
    query = _query(pattern, define, skip, [v.name for v in variables])
    name = query.index("MATCH_RECOGNIZE")
    read = read_match_recognize(code_only(query), name, name + len("MATCH_RECOGNIZE"))
    assert [query[a:b] for a, b in read.partition_by] == ["symbol"]
    assert [query[a:b] for a, b in read.order_by] == ["rowtime"]
    assert [(alias, query[a:b]) for alias, a, b in read.measures][:2] == [
        ("A_n", "COUNT(A.price)"),
        ("A_first", "CAST(FIRST(A.rowtime) AS STRING)"),
    ]
    assert len(read.measures) == 4 * len(variables) + 1
    assert [(var, query[a:b]) for var, a, b in read.define] == [
        ("A", "price > 12"),
        ("B", "B.price < A.price AND AVG(B.price) < 14"),
        ("C", "C.price > A.price"),
    ]
    assert read.skip == "TO NEXT ROW"


MATCH_JOB = """\
SET sql.dialect = 'flink';
CREATE TABLE t (symbol STRING, price INT, volume INT, rowtime TIMESTAMP(3),
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');
CREATE TABLE o (symbol STRING, bottom INT)
  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
INSERT INTO o SELECT symbol, bottom FROM t MATCH_RECOGNIZE (PARTITION BY symbol
  ORDER BY rowtime MEASURES LAST(B.price) AS bottom AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > PREV(price)) AS T
  WHERE bottom > 0;
"""

#: An edit of MATCH_JOB: (old text, new text, verdict, a phrase of a finding).
MATCH_EDITS = {
    "pattern": ("B+ C", "B+? C", Verdict.INCOMPATIBLE, "pattern is now"),
    "condition": ("price > PREV(price)", "price >= PREV(price)", Verdict.INCOMPATIBLE, "define"),
    "skip": ("PAST LAST ROW", "TO NEXT ROW", Verdict.INCOMPATIBLE, "after match"),
    "a column more in the rows": (
        "LAST(B.price) AS bottom",
        "LAST(B.price) AS bottom, SUM(B.volume) AS v",
        Verdict.INCOMPATIBLE,
        "rows is now",
    ),
    "a measure more": (
        "LAST(B.price) AS bottom",
        "LAST(B.price) AS bottom, MIN(B.price) AS low",
        Verdict.COMPATIBLE,
        "computes the measures",
    ),
    "filter after": ("bottom > 0", "bottom > 5", Verdict.COMPATIBLE, ""),
}


@pytest.mark.parametrize("edit", list(MATCH_EDITS))
def test_a_match_edit_is_refused_where_it_changes_the_partial_matches(edit: str) -> None:
    """The state manifest's MatchRecognizer: the pattern, its conditions, the skip and the
    rows' columns give the kept partial matches their meaning (refused); the measures are
    computed as a match ends (free)."""
    old, new, verdict, phrase = MATCH_EDITS[edit]
    assert old in MATCH_JOB
    before = describe_state(flowc.compile(MATCH_JOB, "job.flow", for_spark=True))
    (operator,) = before.queries[0].operators
    assert operator.processor is not None and operator.processor.name == "MatchRecognizer"
    after = describe_state(flowc.compile(MATCH_JOB.replace(old, new), "job.flow", for_spark=True))
    comparison = compare(before, after)
    messages = [f.message for _, f in comparison.findings()]
    assert comparison.verdict is verdict, messages
    assert any(phrase in m for m in messages), messages


def _state_size(rows: int) -> int:
    """The JSON state's size after ``rows`` rows of a greedy loop that never ends: every
    row an A of ``A+ B`` (B must fail A's condition), so every row's partial match stays
    open."""
    nfa = compile_pattern([(1, None, True), (1, 1, True)])
    conditions: list[Condition | None] = [
        lambda context: _number(context[1][1]) >= 0,
        lambda context: _number(context[1][1]) > 14,
    ]
    state = match_new_state()
    for i in range(rows):
        assert match_feed(nfa, conditions, True, state, [f"t{i:04d}", 10 + i % 7]) == []
        state = json.loads(json.dumps(state))
    assert sum(1 for p in state["partials"] if p[1] >= 0) == rows
    return len(json.dumps(state))


def test_the_state_of_a_greedy_loop_that_never_ends_grows_linearly() -> None:
    """N open partial matches from N rows share their rows: twice the rows, about twice
    the state (each partial match repeating its path would make it four times)."""
    small, large = _state_size(200), _state_size(400)
    assert large < 2.5 * small, (small, large)


def test_the_readers_give_the_paths_rows() -> None:
    """``match_rows``, ``match_last`` and ``match_first`` over a shared path (a start row
    and runs of variables) give what they give over the path's (variable, row) pairs
    written out, for random paths, variables and offsets."""
    rng = random.Random(2803)
    for _ in range(300):
        begins = rng.randint(0, 5)
        runs: list[list[int]] = []
        for variable in sorted(rng.sample(range(4), rng.randint(0, 4))):
            runs.append([variable, rng.randint(1, 4)])
        pairs: list[tuple[int, list[object]]] = []
        at = begins
        for variable, count in runs:
            pairs += [(variable, [f"r{at + k}", at + k]) for k in range(count)]
            at += count
        rows = {str(row[1]): row for _, row in pairs}
        current: list[object] = ["now", -1]
        defining = rng.randint(0, 3)
        path: MatchPath = (rows, begins, runs)
        context: MatchContext = (path, current, defining)
        for variable in (-1, 0, 1, 2, 3):
            written = [r for v, r in pairs if variable in (-1, v)]
            if variable in (-1, defining):
                written.append(current)
            assert match_rows(context, variable) == written
            for offset in range(len(written) + 2):
                last = written[-1 - offset][0] if offset < len(written) else None
                first = written[offset][0] if offset < len(written) else None
                assert match_last(context, variable, 0, offset) == last, (runs, variable)
                assert match_first(context, variable, 0, offset) == first, (runs, variable)


#: A random pattern as data, so it can be written for Flink, the port and the engine: each
#: variable's (name, least rows, most rows or None, greedy, condition kind, bound).
Spec = list[tuple[str, int, int | None, bool, str, int]]


def _random_spec(rng: random.Random) -> tuple[Spec, bool]:
    """A random pattern of the subset Flink runs (not every variable optional, the last
    one not greedy over a range, ``?`` never reluctant) and whether it skips past the
    last row."""
    quantifiers: list[tuple[int, int | None]] = [
        (1, 1),
        (0, 1),
        (1, None),
        (0, None),
        (2, 2),
        (2, 3),
        (0, 2),
        (2, None),
    ]
    size = rng.randint(1, 4)
    spec: Spec = []
    for index in range(size):
        low, high = rng.choice(quantifiers)
        greedy = rng.random() < 0.6
        if index == size - 1 and low != high:
            greedy = False
        if (low, high) == (0, 1):
            greedy = True
        kinds = ["none", "above", "below", "down", "up"]
        kind = rng.choice(kinds + ["under_a", "over_a"] * 2 if index else kinds)
        spec.append((chr(65 + index), low, high, greedy, kind, rng.randint(8, 18)))
    if all(low == 0 for _, low, *_ in spec):
        spec[0] = (spec[0][0], 1, 1, True, *spec[0][4:])
    return spec, rng.random() < 0.5


def _spec_sql(spec: Spec) -> tuple[str, str]:
    """The PATTERN's and DEFINE's text for Flink."""
    written = {
        (1, 1): "",
        (0, 1): "?",
        (1, None): "+",
        (0, None): "*",
        (2, 2): "{2}",
        (2, 3): "{2,3}",
        (0, 2): "{0,2}",
        (2, None): "{2,}",
    }
    conditions = {
        "above": "price > {bound}",
        "below": "price < {bound}",
        "down": "price < PREV(price)",
        "up": "price > PREV(price)",
        "under_a": "price < A.price",
        "over_a": "price > A.price",
    }
    pattern = []
    define = []
    for name, low, high, greedy, kind, bound in spec:
        reluctant = not greedy and low != high and (low, high) != (0, 1)
        pattern.append(name + written[(low, high)] + ("?" if reluctant else ""))
        if kind != "none":
            define.append(f"{name} AS " + conditions[kind].format(bound=bound))
    return " ".join(pattern), ", ".join(define or ["A AS TRUE"])


def _spec_port(spec: Spec) -> list[Variable]:
    return [
        Variable(name, low, high, greedy, _condition_pair(kind, bound)[0])
        for name, low, high, greedy, kind, bound in spec
    ]


def _flink_refuses(spec: Spec) -> bool:
    """Flink 2.3's Pattern.optional(): "Optional pattern cannot be preceded by greedy
    pattern", a variable that may have no row right after one greedy over a range."""
    return any(
        low == 0 and before[3] and before[1] != before[2] and before[1:3] != (0, 1)
        for before, (_, low, *_) in pairwise(spec)
    )


def _tie_cases(count: int) -> list[tuple[Spec, bool, list[int]]]:
    """The first ``count`` random patterns over random rows in which the port emits a match
    that waited with another completed match from its start row (about 2 in 100)."""
    rng = random.Random(2829)
    found: list[tuple[Spec, bool, list[int]]] = []
    while len(found) < count:
        spec, past_last = _random_spec(rng)
        prices = [rng.randint(5, 20) for _ in range(rng.randint(5, 30))]
        skip = "PAST LAST ROW" if past_last else "TO NEXT ROW"
        if _flink_refuses(spec):
            continue
        if any(m.rivals for m in find_matches(_spec_port(spec), _timed(prices), skip)):
            found.append((spec, past_last, prices))
    return found


def _timed(prices: list[int]) -> list[dict[str, object]]:
    """One key's rows, one a second."""
    return [
        {"symbol": "K", "rowtime": f"2024-01-01 10:{i // 60:02d}:{i % 60:02d}.000", "price": p}
        for i, p in enumerate(prices)
    ]


def _one_line(query: str, names: list[str], case: int) -> str:
    """The case's query as (case number, its measures joined by "|", NULL as "-"), so that
    every case runs in one Flink job (a UNION ALL of them)."""
    measures = [f"{v}_{m}" for v in names for m in ("n", "first", "last", "avg")] + ["mrt"]
    joined = ", ".join(f"COALESCE(CAST({m} AS STRING), '-')" for m in measures)
    return f"SELECT {case} AS c, CONCAT_WS('|', {joined}) AS m FROM ({query}) AS Q{case}"


@requires_flink
def test_flink_emits_the_tied_match_its_queue_puts_first(tmp_path: Path) -> None:
    """Where two completed matches from one start row wait together, PyFlink 2.3 emits the
    one its PriorityQueue puts first (the port follows the queue step for step): 40 random
    patterns that meet it, each one's matches' measures equal, in order (in 10 of them the
    first of the tied matches to complete is not the one emitted)."""
    cases = _tie_cases(40)
    statements = []
    queries = []
    for number, (spec, past_last, prices) in enumerate(cases):
        data = tmp_path / f"c{number}.csv"
        data.write_text("".join(f"K,{r['rowtime']},{r['price']}\n" for r in _timed(prices)))
        statements.append(DDL.format(path=data).replace("TABLE t ", f"TABLE t{number} "))
        pattern, define = _spec_sql(spec)
        skip = "PAST LAST ROW" if past_last else "TO NEXT ROW"
        names = [name for name, *_ in spec]
        query = _query(pattern, define, skip, names).replace(" FROM t ", f" FROM t{number} ")
        queries.append(_one_line(query, names, number))
    answered = ask_flink(COLLECT_CHANGELOG, {"ties": [*statements, " UNION ALL ".join(queries)]})
    flink: dict[int, list[str]] = {}
    for kind, (case, measures) in answered["ties"]:
        assert kind == "+I"
        flink.setdefault(int(case), []).append(measures)
    ties = 0
    for number, (spec, past_last, prices) in enumerate(cases):
        skip = "PAST LAST ROW" if past_last else "TO NEXT ROW"
        names = [name for name, *_ in spec]
        port = find_matches(_spec_port(spec), _timed(prices), skip)
        ties += sum(1 for m in port if m.rivals)
        expected = [
            "|".join("-" if x is None else str(x) for x in _expected_row("K", m, names)[1:])
            for m in port
        ]
        assert flink.get(number, []) == expected, (spec, skip, prices)
    assert ties >= 40, ties


def test_the_engine_emits_the_tied_match_flinks_queue_puts_first() -> None:
    """The 40 random patterns whose tied matches Flink answered
    (``test_flink_emits_the_tied_match_its_queue_puts_first``): the engine, its state
    through JSON after every row, emits the port's matches, so Flink's."""
    tied = 0
    for spec, past_last, prices in _tie_cases(40):
        conditions = [_condition_pair(kind, bound)[1] for _, _, _, _, kind, bound in spec]
        tied += _engine_against_port(_spec_port(spec), conditions, past_last, prices)
    assert tied >= 40, tied


def test_the_language_server_shows_the_clause_as_written() -> None:
    """The hidden view a clause is read as is no symbol of the document (no name of it is
    written), and a hover on the clause shows its Match step."""
    from flowc.lsp.analysis import analyse, hover

    document = analyse("file:///job.flow", MATCH_JOB, "job.flow")
    assert [(s.name, s.kind) for s in document.symbols] == [("t", "source"), ("o", "sink")]
    line = next(i for i, t in enumerate(MATCH_JOB.splitlines(), 1) if "MATCH_RECOGNIZE" in t)
    column = MATCH_JOB.splitlines()[line - 1].index("MATCH_RECOGNIZE") + 2
    shown = hover(document, line, column)
    assert shown is not None and "match" in shown
