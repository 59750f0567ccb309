"""Each operator's changelog mode (flowc.graph.changelog) for each step kind, without
Flink: the modes Flink 2.3's ``EXPLAIN CHANGELOG_MODE`` prints for the same queries
(tests/test_changelog_against_flink.py asks Flink itself where it is set up)."""

from __future__ import annotations

import textwrap

import pytest

import flowc
from flowc.graph.changelog import ALL_CHANGES, INSERT_ONLY, ModifyKinds, mode_text

HEAD = """
SET parallelism = 1;
CREATE SOURCE bids (auction BIGINT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'data/bids', format = 'json');
CREATE SOURCE asks (auction BIGINT, ask BIGINT, ask_ts TIMESTAMP,
  WATERMARK FOR ask_ts AS ask_ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'data/asks', format = 'json');
CREATE SINK shown WITH (connector = 'console', mode = 'update');
CREATE SINK kept WITH (connector = 'files', path = 'out/kept', format = 'parquet',
  mode = 'update', key = 'auction');
"""

#: (query, the mode of each node but the sources, in node order; sinks print NONE).
CASES = {
    "calc": (
        "INSERT INTO shown FROM bids |> WHERE price > 0 |> SELECT auction, price + 1 AS p;",
        ["I", "I", "NONE"],
    ),
    "aggregate_retract": (
        "INSERT INTO shown FROM bids |> KEY BY auction |> AGGREGATE sum(price) AS total;",
        ["I,UB,UA", "NONE"],
    ),
    "aggregate_upsert_sink": (
        "INSERT INTO kept FROM bids |> KEY BY auction |> AGGREGATE sum(price) AS total;",
        ["I,UA", "NONE"],
    ),
    "global_aggregate": (
        "INSERT INTO shown FROM bids |> AGGREGATE count(*) AS n;",
        ["I,UB,UA", "NONE"],
    ),
    "aggregate_of_aggregate": (
        "INSERT INTO shown FROM bids |> KEY BY auction |> AGGREGATE count(*) AS n"
        " |> KEY BY n |> AGGREGATE count(*) AS auctions;",
        ["I,UB,UA", "I,UB,UA,D", "NONE"],
    ),
    "top_n": (
        "INSERT INTO shown FROM bids |> TOP 3 BY price DESC PER auction;",
        ["I,UB,UA,D", "NONE"],
    ),
    "top_n_upsert_sink": (
        "INSERT INTO kept FROM bids |> TOP 1 BY price DESC PER auction;",
        ["I,UA,D", "NONE"],
    ),
    "deduplicate": (
        "INSERT INTO shown FROM bids |> DEDUPLICATE ON auction;",
        ["I", "NONE"],
    ),
    "window_aggregate": (
        "INSERT INTO shown FROM bids |> KEY BY auction"
        " |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE sum(price) AS total;",
        ["I", "NONE"],
    ),
    "window_top_n": (
        "INSERT INTO shown FROM bids |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)"
        " |> TOP 3 BY price DESC PER auction;",
        ["I", "NONE"],
    ),
    "inner_join": (
        "INSERT INTO shown FROM bids |> JOIN asks ON bids.auction = asks.auction"
        " |> SELECT bids.auction, ask;",
        ["I", "I", "NONE"],
    ),
    "left_join": (
        "INSERT INTO shown FROM bids |> LEFT JOIN asks ON bids.auction = asks.auction"
        " |> SELECT bids.auction, ask;",
        ["I,UB,UA,D", "I,UB,UA,D", "NONE"],
    ),
    "left_interval_join": (
        "INSERT INTO shown FROM bids |> LEFT JOIN asks ON bids.auction = asks.auction"
        " AND ask_ts BETWEEN ts AND ts + INTERVAL 1 MINUTE |> SELECT bids.auction, ask;",
        ["I", "I", "NONE"],
    ),
    "union": (
        "CREATE VIEW a AS FROM asks |> SELECT auction, ask AS price;"
        " INSERT INTO shown FROM bids |> SELECT auction, price |> UNION ALL a;",
        ["I", "I", "NONE"],
    ),
    "union_of_aggregate": (
        "CREATE VIEW a AS FROM asks |> KEY BY auction |> AGGREGATE sum(ask) AS price;"
        " INSERT INTO shown FROM bids |> SELECT auction, price |> UNION ALL a;",
        ["I,UB,UA", "I", "NONE"],
    ),
    "join_of_aggregate": (
        "CREATE VIEW a AS FROM asks |> KEY BY auction |> AGGREGATE count(*) AS n;"
        " INSERT INTO shown FROM bids |> JOIN a ON bids.auction = a.auction"
        " |> SELECT bids.auction, n;",
        ["I,UB,UA", "I,UB,UA", "I,UB,UA", "NONE"],
    ),
}


def _modes(query: str) -> list[str]:
    job = flowc.compile(textwrap.dedent(HEAD) + query, "changelog.flow")
    assert job.stream_graph is not None, job.diagnostics
    return [
        n.changelog_mode for n in job.stream_graph.nodes.values() if not n.name.startswith("Source")
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_changelog_mode_per_operator(name: str) -> None:
    query, expected = CASES[name]
    assert _modes(query) == expected


def test_sources_are_insert_only() -> None:
    job = flowc.compile(textwrap.dedent(HEAD) + CASES["top_n"][0], "changelog.flow")
    assert job.stream_graph is not None
    sources = [n for n in job.stream_graph.nodes.values() if n.name.startswith("Source")]
    assert sources and all(n.changelog_mode == "I" for n in sources)


def test_job_graph_operators_carry_their_nodes_modes() -> None:
    job = flowc.compile(textwrap.dedent(HEAD) + CASES["aggregate_of_aggregate"][0], "c.flow")
    by_node = {n.id: n.changelog_mode for n in job.stream_graph.nodes.values()}
    operators = [op for v in job.job_graph.vertices.values() for op in v.operators]
    assert operators and all(op.changelog_mode == by_node[op.node_id] for op in operators)
    assert '"changelog_mode": "I,UB,UA,D"' in job.job_graph.to_json()
    assert "changelog I,UB,UA,D" in job.stream_graph.to_text()


@pytest.mark.parametrize(
    ("kinds", "before", "text"),
    [
        (INSERT_ONLY, True, "I"),
        (ModifyKinds(update=True), True, "I,UB,UA"),
        (ModifyKinds(update=True), False, "I,UA"),
        (ALL_CHANGES, True, "I,UB,UA,D"),
        (ALL_CHANGES, False, "I,UA,D"),
        (ModifyKinds(delete=True), True, "I,D"),
    ],
)
def test_mode_text_is_flinks_notation(kinds: ModifyKinds, before: bool, text: str) -> None:
    assert mode_text(kinds, before) == text


def test_joined_kinds_are_the_kinds_a_new_object_would_be() -> None:
    """ModifyKinds.__or__ returns shared values: each equals, and prints as, the new object
    the plain join would make."""
    every = [ModifyKinds(update, delete) for update in (False, True) for delete in (False, True)]
    for left in every:
        for right in every:
            joined = left | right
            plain = ModifyKinds(left.update or right.update, left.delete or right.delete)
            assert joined == plain and repr(joined) == repr(plain) and hash(joined) == hash(plain)
            assert type(joined) is ModifyKinds
