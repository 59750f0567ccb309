"""flowc's bounds (docs/limits.md): small programs whose plans would explode, and huge
input, either compile (each pass near-linear in the program) or stop with the bound's
diagnostic (E0901-E0903); the memo caches stay within their budgets in bytes.

No test here measures time: a regression to exponential work shows as a test that does
not finish (the ladders below ask for 2^20 and 2^40 edges, or 2^40 lineage paths).
"""

from __future__ import annotations

import pytest

import flowc
from flowc import limits
from flowc.sql import sqltypes

HEADER = (
    "SET parallelism = 2;\n"
    "CREATE SOURCE src (k BIGINT, v BIGINT, ts TIMESTAMP,\n"
    "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS) WITH (connector = 'datagen');\n"
    "CREATE SINK out WITH (connector = 'noop');\n"
)


def codes(text: str) -> list[str]:
    """The error codes of compiling ``text``; [] when it compiles."""
    try:
        flowc.compile(text, "limits.flow")
    except flowc.CompileError as error:
        return sorted({d.code for d in error.diagnostics if d.severity == "error"})
    return []


def compiled(text: str) -> flowc.CompiledJob:
    job = flowc.compile(text, "limits.flow")
    # every stage renders (the graph stages are linear in the plan, which is bounded)
    for stage in (job.transformations, job.stream_graph, job.job_graph):
        assert stage.to_text() and stage.to_json()
    assert job.physical_plan.to_text() and job.physical_plan.to_json()
    return job


# ---------------------------------------------------------------- programs


def union_ladder(n: int, tail: str = "") -> str:
    """v_i = v_(i-1) UNION ALL v_(i-1): 2^n edges into the sink."""
    lines = [HEADER, "CREATE VIEW v0 AS FROM src |> WHERE v > 0;"]
    lines += [f"CREATE VIEW v{i} AS FROM v{i - 1} |> UNION ALL v{i - 1};" for i in range(1, n + 1)]
    lines.append(f"INSERT INTO out FROM v{n}{tail};")
    return "\n".join(lines) + "\n"


def join_ladder(n: int, kind: str = "") -> str:
    """v_i joins v_(i-1) with a view of v_(i-1): 2^n paths from the sink to the source."""
    lines = [HEADER, "CREATE VIEW v0 AS FROM src |> WHERE v > 0;"]
    for i in range(1, n + 1):
        lines.append(f"CREATE VIEW b{i} AS FROM v{i - 1} |> SELECT k AS rk, ts AS rts;")
        lines.append(
            f"CREATE VIEW v{i} AS FROM v{i - 1} |> {kind}JOIN b{i} ON k = rk "
            "AND rts BETWEEN ts AND ts + INTERVAL 1 MINUTE |> SELECT k, v, ts;"
        )
    lines.append(
        f"INSERT INTO out FROM v{n} |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) "
        "|> AGGREGATE count(*) AS c;"
    )
    return "\n".join(lines) + "\n"


def sql_view_chain(n: int) -> str:
    lines = [HEADER, "CREATE VIEW v0 AS SELECT k, v FROM src WHERE v > 0;"]
    lines += [
        f"CREATE VIEW v{i} AS SELECT k, v + 1 AS v FROM v{i - 1} WHERE k > {i};"
        for i in range(1, n + 1)
    ]
    lines.append(f"INSERT INTO out SELECT k, v FROM v{n};")
    return "\n".join(lines) + "\n"


def pipe_view_chain(n: int, step: str = "REBALANCE") -> str:
    lines = [HEADER, "CREATE VIEW v0 AS FROM src |> WHERE v > 0;"]
    lines += [
        f"CREATE VIEW v{i} AS FROM v{i - 1} |> WHERE k > {i} |> {step};" for i in range(1, n + 1)
    ]
    lines.append(f"INSERT INTO out FROM v{n};")
    return "\n".join(lines) + "\n"


def literal_program(size: int, salt: int = 0) -> str:
    literal = (f"{salt}-" + "x" * size)[:size]
    return HEADER + f"INSERT INTO out FROM src |> WHERE CAST(k AS STRING) <> '{literal}';\n"


# ---------------------------------------------------------------- ladders


@pytest.mark.parametrize("n", [20, 40])
def test_union_doubling_ladder_stops_at_the_edge_bound(n: int) -> None:
    assert codes(union_ladder(n)) == ["E0903"]
    # a partition step after it: one virtual node per edge, bounded the same way
    assert codes(union_ladder(n, " |> REBALANCE")) == ["E0903"]


def test_union_doubling_ladder_below_the_bound_has_all_of_flinks_parallel_edges() -> None:
    job = compiled(union_ladder(10, " |> REBALANCE"))
    sink = next(n for n in job.stream_graph.nodes.values() if n.kind == "sink")
    assert len(sink.in_edges) == 2**10
    assert [e.unique_id for e in sink.in_edges] == list(range(2**10))
    assert {e.partitioner for e in sink.in_edges} == {"REBALANCE"}
    assert len(job.job_graph.edges()) == 2**10


@pytest.mark.parametrize("kind", ["", "LEFT "])
def test_join_ladder_of_forty_compiles(kind: str) -> None:
    """Each view read twice: the streaming checks walk each view once or twice, not once
    per path (2^40)."""
    job = compiled(join_ladder(40, kind))
    assert len(job.stream_graph.nodes) == 3 * 40 + 4
    assert job.spark_diagnostics == ()


def test_five_thousand_chained_sql_views_pass_the_chain_bound() -> None:
    """10,000 operators chained into one task: Flink's description of that task would be
    150 million characters."""
    assert codes(sql_view_chain(5000)) == ["E0903"]


def test_a_chain_below_the_bound_compiles() -> None:
    job = compiled(sql_view_chain(400))
    [vertex] = job.job_graph.vertices.values()
    assert 800 < len(vertex.operators) <= limits.MAX_CHAINED_OPERATORS


def test_a_deep_chain_of_views_with_exchanges_compiles_without_deep_recursion() -> None:
    """Every pass walks a 3,000-view pipeline with explicit stacks."""
    job = compiled(pipe_view_chain(3000))
    # the source and the first two filters chain; each later filter, and the sink, is a task
    assert len(job.job_graph.vertices) == 3001


# ---------------------------------------------------------------- source, literals, steps


def test_a_huge_file_is_refused_before_parsing() -> None:
    text = HEADER + "-- " + "x" * limits.MAX_SOURCE_CHARS + "\n"
    assert codes(text) == ["E0901"]


def test_a_file_at_the_source_bound_is_read() -> None:
    text = HEADER + "INSERT INTO out FROM src;\n"
    padding = limits.MAX_SOURCE_CHARS - len(text) - 4
    assert codes(text + "-- " + "x" * padding + "\n") == []


def test_a_literal_past_the_bound_is_refused() -> None:
    text = literal_program(limits.MAX_LITERAL_CHARS + 1)
    try:
        flowc.compile(text, "limits.flow")
    except flowc.CompileError as error:
        [diagnostic] = error.diagnostics
        assert diagnostic.code == "E0902"
        line = text.splitlines()[4]
        assert (diagnostic.span.line, diagnostic.span.column) == (5, line.index("'") + 1)
    else:
        raise AssertionError("a literal past the bound compiled")


def test_long_text_in_comments_is_no_literal() -> None:
    text = (
        HEADER + "-- '" + "x" * (limits.MAX_LITERAL_CHARS + 10) + "'\nINSERT INTO out FROM src;\n"
    )
    assert codes(text) == []


def test_steps_past_the_bound_stop_the_parse() -> None:
    text = HEADER + "INSERT INTO out FROM src" + " |> WHERE k > 0" * (limits.MAX_STEPS + 1) + ";\n"
    assert codes(text) == ["E0903"]


def test_an_expression_past_the_token_bound_is_not_parsed() -> None:
    """Counted before sqlglot parses it (a million terms would take a minute and GBs)."""
    terms = "+".join(["1"] * 1_000_000)
    assert codes(HEADER + f"INSERT INTO out FROM src |> WHERE k > {terms};\n") == ["E0903"]


def test_tokens_of_all_expressions_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flowc.syntax.parser.MAX_TOKENS", 30)
    insert = "INSERT INTO out FROM src |> WHERE k > 1 AND v < 2 |> SELECT k, v + 1 AS v;\n"
    # the watermark's 5 tokens, then 11 per INSERT (7 + 3, and a bare name is one)
    assert codes(HEADER + insert * 2) == []
    assert codes(HEADER + insert * 3) == ["E0903"]


def test_sql_clauses_count_as_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flowc.syntax.parser.MAX_STEPS", 10)
    query = "SELECT k, count(*) AS n FROM src WHERE v > 0 GROUP BY k"  # 4 steps
    assert "E0903" not in codes(HEADER + f"INSERT INTO out {query};\n")
    union = f"{query} UNION ALL {query} UNION ALL {query}"
    assert codes(HEADER + f"INSERT INTO out {union};\n") == ["E0903"]


def test_operators_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sources and sinks are operators but no steps: the StreamGraph's own bound."""
    monkeypatch.setattr("flowc.graph.stream_graph.MAX_STREAM_NODES", 30)
    lines = ["CREATE SINK out WITH (connector = 'noop');"]
    for i in range(16):
        lines.append(f"CREATE SOURCE s{i} (k BIGINT) WITH (connector = 'datagen');")
        lines.append(f"INSERT INTO out FROM s{i};")
    assert codes("\n".join(lines)) == ["E0903"]
    assert codes("\n".join(lines[:-2])) == []


# ---------------------------------------------------------------- memory of the caches


def test_distinct_large_literals_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each 1 MB literal is compiled, none kept: the caches stay within their budgets."""
    budget = sum(cache.max_bytes for cache in limits.CACHES.values())
    for salt in range(6):
        assert codes(literal_program(1_000_000, salt)) == []
        assert sum(limits.cache_bytes().values()) <= budget
        for cache in limits.CACHES.values():
            assert all(size <= cache.max_entry_bytes for _, size in cache._data.values())


def test_distinct_struct_types_stay_within_the_budget() -> None:
    cache = sqltypes._data_types
    for i in range(1000):
        text = (
            f"STRUCT<a{i}: BIGINT, b: ARRAY<STRING>, c: MAP<STRING, DOUBLE>, "
            f"d: STRUCT<x{i}: INT, y: TIMESTAMP>>"
        )
        assert sqltypes.data_type(text) is sqltypes.data_type(text)  # kept while recent
        sqltypes.normalize_type(text)
    assert 0 < cache.bytes <= cache.max_bytes
    assert len(cache) < 1000
    assert cache.bytes == sum(size for _, size in cache._data.values())


def test_distinct_expressions_stay_within_the_budget() -> None:
    for i in range(300):
        conditions = " AND ".join(f"v + {i * 50 + j} > k" for j in range(50))
        assert codes(HEADER + f"INSERT INTO out FROM src |> WHERE {conditions};\n") == []
    for cache in limits.CACHES.values():
        assert 0 <= cache.bytes <= cache.max_bytes


def test_bounded_cache_evicts_the_oldest_and_skips_what_is_too_large() -> None:
    cache: limits.BoundedCache[str, str] = limits.BoundedCache(
        "test cache", max_bytes=3 * (limits.ENTRY_OVERHEAD + 100), max_entry_bytes=1000
    )
    try:
        for key in "abcd":
            cache.put(key, key.upper(), 100)
        assert [k for k in "abcd" if k in cache] == ["b", "c", "d"]
        cache.put("big", "x", 1000)
        assert "big" not in cache
        cache.put("c", "C2", 50)  # replacing an entry counts its new size only
        assert cache.get("c") == ("C2", 50 + limits.ENTRY_OVERHEAD)
        assert cache.bytes == 2 * (limits.ENTRY_OVERHEAD + 100) + limits.ENTRY_OVERHEAD + 50
    finally:
        del limits.CACHES["test cache"]
