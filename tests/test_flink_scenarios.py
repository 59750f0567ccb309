"""Flink's conformance scenarios (flink-semantics.md §7), written as .flow programs.

Each test compiles a small program and checks the values Flink itself produces for the
equivalent DataStream job: vertex counts, chained names, parallelism, max parallelism,
ship strategies and distribution patterns, result partition types, operator ids, slot
sharing, key groups, pointwise wiring and pipelined regions. Where the expected value is
"derived", it was computed by hand from the rules of §1-§6.

Scenarios skipped, because the language cannot express them:

- 6 (partly): per-edge exchange modes (``PIPELINED``/``BATCH``/``HYBRID_*`` on a partition)
  do not exist in flow; only the UNDEFINED-mode variants (streaming and batch) are tested.
- 8: a ``BATCH`` exchange mode on a partition step in a streaming job (no exchange modes).
- 10: legacy sources (``HEAD`` strategy) and YieldingOperatorFactory operators.
- 11 (partly): ``chain-operators-with-different-max-parallelism = false`` is not a setting;
  only Flink's default (true) is tested.
- 12: MultipleInput operators, ``HEAD_WITH_SOURCES`` chaining of sources, Sink V2 writers.
- 13 (partly): the CASCADING vertex description mode is not a setting; TREE is tested.
- 14 (partly): ``pipeline.vertex-name-include-index-prefix`` is not a setting.
- 15: ``FORWARD_EDGES_PIPELINED`` batch shuffle mode is not a setting; a derived
  all-blocking batch variant of the dataset-reuse rule is tested instead.
- 16: hybrid shuffle.
"""

from __future__ import annotations

import json

import pytest

import flowc
from flowc.job import CompiledJob

DISABLED_CHECKPOINT_INTERVAL = 9223372036854775807  # Long.MAX_VALUE

# Derived operator ids from §3.
UID_SOURCE_HASH = "e5a72f353fc1e6bbf3bd96a41384998c"
UID_MAP_HASH = "23ab3a59b17e9c45f95cff4c728611fc"
FIRST_NODE_NO_CHAINED_OUTPUT = "bc764cd8ddf7a0cff126f51c16239658"
FIRST_NODE_ONE_CHAINED_OUTPUT = "cbc357ccb763df2852fee8c4fc7d55f2"
MAP_CHAINED_AFTER_FIRST = "7df19f87deec5680128845fd9a6ca18d"

SRC = "(k BIGINT, v BIGINT) WITH (connector = 'datagen'"


def compile_flow(text: str) -> CompiledJob:
    return flowc.compile(text, "x.flow")


def errors(text: str) -> list[flowc.Diagnostic]:
    with pytest.raises(flowc.CompileError) as info:
        compile_flow(text)
    return [d for d in info.value.diagnostics if d.severity is flowc.Severity.ERROR]


def vertex_names(job: CompiledJob) -> list[str]:
    """Vertex names in topological order."""
    return [v.name for v in job.job_graph.topological()]


def vertex(job: CompiledJob, name: str) -> flowc.graph.job_graph.JobVertex:
    matches = [v for v in job.job_graph.vertices.values() if v.name == name]
    assert len(matches) == 1, f"{name!r} not among {vertex_names(job)}"
    return matches[0]


def physical(job: CompiledJob, name: str) -> flowc.graph.physical.PhysicalVertex:
    matches = [v for v in job.physical_plan.vertices if v.vertex.name == name]
    assert len(matches) == 1, f"{name!r} not among {vertex_names(job)}"
    return matches[0]


def node(job: CompiledJob, name: str) -> flowc.graph.stream_graph.StreamNode:
    matches = [n for n in job.stream_graph.nodes.values() if n.name == name]
    assert len(matches) == 1, f"{name!r} is not exactly one StreamNode"
    return matches[0]


def edge_summary(job: CompiledJob) -> list[tuple[str, str, str, str, str]]:
    """(producer, consumer, ship strategy, distribution, exchange) of every JobEdge."""
    vertices = job.job_graph.vertices
    return [
        (vertices[e.producer].name, v.name, e.ship_strategy, e.distribution, e.exchange)
        for v in job.job_graph.topological()
        for e in v.inputs
    ]


def operator_ids(job: CompiledJob) -> dict[str, str]:
    """Operator name → operator id (names must be unique in the program)."""
    graph = job.stream_graph
    names = [n.name for n in graph.nodes.values()]
    assert len(names) == len(set(names))
    return {n.name: graph.operator_id(n.id) for n in graph.nodes.values()}


def wiring(plan_vertex: flowc.graph.physical.PhysicalVertex) -> list[list[tuple[int, int]]]:
    """Per consumer subtask, the (first, last) producer subtasks of each input."""
    return [[(w.first, w.last) for w in s.inputs] for s in plan_vertex.subtasks]


# ---------------------------------------------------------------- scenario 1


def test_scenario_01_parallelism_one_keyed_not_chained() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v |> KEY BY k |> SELECT k, v;
        """
    )
    assert vertex_names(job) == ["Source: s -> Map", "Map -> Sink: o"]
    assert [v.parallelism for v in job.job_graph.topological()] == [1, 1]
    assert edge_summary(job) == [
        ("Source: s -> Map", "Map -> Sink: o", "HASH", "ALL_TO_ALL", "pipelined_bounded")
    ]


# ---------------------------------------------------------------- scenario 2


def test_scenario_02_checkpointing_disabled() -> None:
    job = compile_flow(
        f"CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console'); INSERT INTO o FROM s;"
    )
    checkpoints = job.job_graph.checkpoints
    assert checkpoints.interval_ms == DISABLED_CHECKPOINT_INTERVAL
    assert checkpoints.exactly_once is False
    assert checkpoints.mode == "AT_LEAST_ONCE"
    assert json.loads(job.job_graph.to_json())["checkpoints"]["interval"] == (
        DISABLED_CHECKPOINT_INTERVAL
    )


@pytest.mark.parametrize(
    ("settings", "interval", "exactly_once", "mode"),
    [
        ("SET checkpoint.interval = 10s;", 10_000, True, "EXACTLY_ONCE"),
        ("SET checkpoint.interval = 500ms;", 500, True, "EXACTLY_ONCE"),
        (
            "SET checkpoint.interval = 1min; SET checkpoint.mode = at_least_once;",
            60_000,
            False,
            "AT_LEAST_ONCE",
        ),
    ],
)
def test_scenario_02_checkpointing_enabled(
    settings: str, interval: int, exactly_once: bool, mode: str
) -> None:
    job = compile_flow(
        f"{settings} CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s;"
    )
    checkpoints = job.job_graph.checkpoints
    assert (checkpoints.interval_ms, checkpoints.exactly_once, checkpoints.mode) == (
        interval,
        exactly_once,
        mode,
    )


def test_scenario_02_batch_jobs_never_checkpoint() -> None:
    job = compile_flow(
        "SET execution.mode = batch; SET checkpoint.interval = 10s;"
        f" CREATE SOURCE s {SRC}, number_of_rows = 10);"
        " CREATE SINK o WITH (connector = 'console'); INSERT INTO o FROM s;"
    )
    assert job.job_graph.job_type == "BATCH"
    assert job.job_graph.checkpoints.interval_ms == DISABLED_CHECKPOINT_INTERVAL
    assert job.job_graph.checkpoints.exactly_once is False


# ---------------------------------------------------------------- scenario 3


def test_scenario_03_parallelism_configured_unchained() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console', parallelism = 20);
        INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 10);
        """
    )
    ordered = job.job_graph.topological()
    assert [v.name for v in ordered] == ["Source: s", "Map", "Sink: o"]
    assert [v.parallelism for v in ordered] == [4, 10, 20]
    assert [v.parallelism_configured for v in ordered] == [False, True, True]
    assert [e[2:4] for e in edge_summary(job)] == [("REBALANCE", "ALL_TO_ALL")] * 2


def test_scenario_03_parallelism_configured_chained() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console', parallelism = 4);
        INSERT INTO o FROM s |> SELECT k, v;
        """
    )
    (only,) = job.job_graph.vertices.values()
    assert only.name == "Source: s -> Map -> Sink: o"
    assert only.parallelism == 4
    assert only.parallelism_configured is True


def test_scenario_03_nothing_configured() -> None:
    job = compile_flow(
        f"SET parallelism = 4; CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s |> SELECT k, v;"
    )
    (only,) = job.job_graph.vertices.values()
    assert only.parallelism_configured is False


# ---------------------------------------------------------------- scenario 4


def test_scenario_04_global_max_parallelism_fills_unset_operators() -> None:
    job = compile_flow(
        f"""
        SET max_parallelism = 4;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console', max_parallelism = 20);
        INSERT INTO o FROM s |> SELECT k, v WITH (max_parallelism = 10);
        """
    )
    assert node(job, "Source: s").max_parallelism == 4
    assert node(job, "Map").max_parallelism == 10
    assert node(job, "Sink: o").max_parallelism == 20
    # chain-operators-with-different-max-parallelism defaults to true: one chain, whose
    # vertex takes the head's max parallelism.
    (only,) = job.job_graph.vertices.values()
    assert only.name == "Source: s -> Map -> Sink: o"
    assert only.max_parallelism == 4
    assert job.physical_plan.vertices[0].max_parallelism == 4


def test_scenario_04_explicit_max_parallelism_wins_over_global() -> None:
    job = compile_flow(
        f"""
        SET max_parallelism = 42;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v WITH (max_parallelism = 17);
        """
    )
    assert node(job, "Source: s").max_parallelism == 42
    assert node(job, "Map").max_parallelism == 17
    assert node(job, "Sink: o").max_parallelism == 42


def test_scenario_04_max_parallelism_stays_unset_without_global() -> None:
    job = compile_flow(
        f"CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s |> SELECT k, v WITH (max_parallelism = 17);"
    )
    assert node(job, "Source: s").max_parallelism is None
    assert node(job, "Map").max_parallelism == 17
    (only,) = job.job_graph.vertices.values()
    assert only.max_parallelism is None
    # the runtime default (SchedulerBase) resolves an unset vertex max parallelism
    assert job.physical_plan.vertices[0].max_parallelism == 128


# ---------------------------------------------------------------- scenario 5


def test_scenario_05_chain_start_and_end() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE s {SRC}, parallelism = 1);
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v;
        """
    )
    assert vertex_names(job) == ["Source: s", "Map -> Sink: o"]
    graph = job.stream_graph
    source, mapper, sink = (node(job, n) for n in ("Source: s", "Map", "Sink: o"))
    # source: chain start and end; map: start, not end; sink: end
    assert [graph.is_chainable(e) for e in source.out_edges] == [False]
    assert [graph.is_chainable(e) for e in mapper.out_edges] == [True]
    assert sink.out_edges == []
    assert vertex(job, "Map -> Sink: o").operators[0].name == "Map"


# ---------------------------------------------------------------- scenario 6


def test_scenario_06_forward_then_rescale_streaming() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC}, parallelism = 1);
        CREATE SINK o WITH (connector = 'console', parallelism = 2);
        INSERT INTO o FROM s |> FORWARD |> SELECT k, v WITH (parallelism = 1) |> RESCALE;
        """
    )
    assert vertex_names(job) == ["Source: s -> Map", "Sink: o"]
    assert edge_summary(job) == [
        ("Source: s -> Map", "Sink: o", "RESCALE", "POINTWISE", "pipelined_bounded")
    ]


def test_scenario_06_forward_then_rescale_batch_undefined_exchange() -> None:
    # Derived: runtime BATCH with UNDEFINED exchange modes. FORWARD edges still chain
    # (only an edge whose exchange mode is BATCH refuses); the rest is BLOCKING.
    job = compile_flow(
        f"""
        SET execution.mode = batch;
        CREATE SOURCE s {SRC}, parallelism = 1, number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console', parallelism = 2);
        INSERT INTO o FROM s |> FORWARD |> SELECT k, v WITH (parallelism = 1) |> RESCALE;
        """
    )
    assert vertex_names(job) == ["Source: s -> Map", "Sink: o"]
    assert edge_summary(job) == [
        ("Source: s -> Map", "Sink: o", "RESCALE", "POINTWISE", "blocking")
    ]


# ---------------------------------------------------------------- scenario 7


SCENARIO_7 = f"""
SET execution.mode = batch;
SET parallelism = 4;
SET chaining = false;
CREATE SOURCE s {SRC}, number_of_rows = 10);
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s
  |> SELECT k, v WITH (parallelism = 1)
  |> RESCALE |> SELECT k, v
  |> REBALANCE |> SELECT k, v
  |> KEY BY k |> SELECT k, v;
"""


def test_scenario_07_batch_all_outputs_blocking() -> None:
    job = compile_flow(SCENARIO_7)
    assert job.job_graph.job_type == "BATCH"
    assert vertex_names(job) == ["Source: s", "Map", "Map", "Map", "Map", "Sink: o"]
    assert [(e[2], e[3], e[4]) for e in edge_summary(job)] == [
        ("REBALANCE", "ALL_TO_ALL", "blocking"),
        ("RESCALE", "POINTWISE", "blocking"),
        ("REBALANCE", "ALL_TO_ALL", "blocking"),
        ("HASH", "ALL_TO_ALL", "blocking"),
        # no partition step, chaining off: Flink 2.3's adaptive batch graph gives the edge a
        # ForwardForUnspecifiedPartitioner, which ships RESCALE where it is not chained
        # (docs/plans.md, "Batch mode"; against real Flink in tests/test_against_flink.py)
        ("RESCALE", "POINTWISE", "blocking"),
    ]
    jobgraph = json.loads(job.job_graph.to_json())
    exchanges = {i["exchange"] for n in jobgraph["nodes"] for i in n.get("inputs", [])}
    assert exchanges == {"blocking"}


def test_scenario_07_batch_regions_and_slot_sharing_per_region() -> None:
    job = compile_flow(SCENARIO_7)
    plan = job.physical_plan
    # all-blocking batch job: one pipelined region per JobVertex
    assert len(plan.pipelined_regions) == 6
    assert sorted(len(r) for r in plan.pipelined_regions) == [1] * 6
    # allVerticesInSameSlotSharingGroupByDefault is false in batch: a group per region
    groups = [v.slot_sharing_group for v in plan.vertices]
    assert len(set(groups)) == 6
    assert plan.slots_per_group == {
        g: v.vertex.parallelism for g, v in zip(groups, plan.vertices, strict=True)
    }


def test_streaming_regions_one_per_connected_component() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE a {SRC});
        CREATE SOURCE b {SRC}, parallelism = 3);
        CREATE SINK o1 WITH (connector = 'console');
        CREATE SINK o2 WITH (connector = 'console');
        INSERT INTO o1 FROM a |> KEY BY k |> AGGREGATE sum(v) AS v;
        INSERT INTO o2 FROM b |> REBALANCE |> SELECT k, v;
        """
    )
    names = {v.id: v.name for v in job.job_graph.vertices.values()}
    regions = [sorted(names[i] for i in r) for r in job.physical_plan.pipelined_regions]
    assert sorted(regions) == [
        ["Keyed Aggregate -> Sink: o1", "Source: a"],
        ["Map -> Sink: o2", "Source: b"],
    ]


def test_batch_named_slot_sharing_group_spans_regions() -> None:
    job = compile_flow(
        f"""
        SET execution.mode = batch;
        CREATE SOURCE s {SRC}, number_of_rows = 10, slot_sharing_group = 'a');
        CREATE SINK o WITH (connector = 'console', parallelism = 2, slot_sharing_group = 'a');
        INSERT INTO o FROM s |> REBALANCE;
        """
    )
    plan = job.physical_plan
    assert len(plan.pipelined_regions) == 2
    assert [v.slot_sharing_group for v in plan.vertices] == ["a", "a"]
    assert plan.slots_required == 2


# ---------------------------------------------------------------- scenario 9


def test_scenario_09_nearest_partitioner_wins() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC}, parallelism = 2);
        CREATE SINK o WITH (connector = 'console', parallelism = 4);
        INSERT INTO o FROM s |> FORWARD |> GLOBAL |> BROADCAST
          |> SELECT k, v WITH (parallelism = 4);
        """
    )
    source = node(job, "Source: s")
    assert [(e.target_id, e.partitioner) for e in source.out_edges] == [
        (node(job, "Map").id, "BROADCAST")
    ]
    assert edge_summary(job) == [
        ("Source: s", "Map -> Sink: o", "BROADCAST", "ALL_TO_ALL", "pipelined_bounded")
    ]


def test_scenario_09_union_keeps_each_inputs_partitioner() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE a {SRC});
        CREATE SOURCE b {SRC});
        CREATE SINK o WITH (connector = 'console');
        CREATE VIEW ra AS FROM a |> REBALANCE;
        CREATE VIEW bb AS FROM b |> BROADCAST;
        INSERT INTO o FROM ra |> UNION ALL bb |> SELECT k, v;
        """
    )
    mapper = node(job, "Map")
    assert [(e.source_id, e.partitioner, e.type_number) for e in mapper.in_edges] == [
        (node(job, "Source: a").id, "REBALANCE", 0),
        (node(job, "Source: b").id, "BROADCAST", 0),
    ]
    # two in-edges: the map heads its own chain
    assert vertex(job, "Map -> Sink: o").inputs[0].ship_strategy == "REBALANCE"


# ---------------------------------------------------------------- scenario 11


def test_scenario_11_different_max_parallelism_still_chains() -> None:
    job = compile_flow(
        f"""
        SET max_parallelism = 10;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s
          |> SELECT k, v WITH (name = 'm1')
          |> SELECT k, v WITH (name = 'm2', max_parallelism = 1)
          |> SELECT k, v WITH (name = 'm3');
        """
    )
    (only,) = job.job_graph.vertices.values()
    assert only.name == "Source: s -> m1 -> m2 -> m3 -> Sink: o"
    assert len(only.operators) == 5
    assert [node(job, n).max_parallelism for n in ("m1", "m2", "m3")] == [10, 1, 10]
    assert only.max_parallelism == 10


# ---------------------------------------------------------------- scenario 13


SCENARIO_13 = f"""
CREATE SOURCE s {SRC}, name = 'test source');
CREATE SINK p1 WITH (connector = 'console', name = 'first print of map1');
CREATE SINK p2 WITH (connector = 'console', name = 'second print of map1');
CREATE SINK p3 WITH (connector = 'console', name = 'first print of map2');
CREATE SINK p4 WITH (connector = 'console', name = 'second print of map2');
CREATE VIEW m1 AS FROM s |> SELECT k, v WITH (name = 'x + 1');
CREATE VIEW m2 AS FROM s |> SELECT k, v WITH (name = 'x + 2');
INSERT INTO p1 FROM m1;
INSERT INTO p2 FROM m1;
INSERT INTO p3 FROM m2;
INSERT INTO p4 FROM m2;
"""


def test_scenario_13_tree_description_and_forked_chain_name() -> None:
    job = compile_flow(SCENARIO_13)
    (only,) = job.job_graph.vertices.values()
    assert only.name == (
        "test source -> (x + 1 -> (first print of map1, second print of map1), "
        "x + 2 -> (first print of map2, second print of map2))"
    )
    assert only.description == (
        "test source\n:- x + 1\n:  :- first print of map1\n:  +- second print of map1\n"
        "+- x + 2\n   :- first print of map2\n   +- second print of map2\n"
    )
    # the view's operators appear once, with two outputs each
    assert len(job.stream_graph.nodes) == 7
    assert only.operators[0].name == "test source"


def test_scenario_13_json_description_is_html_escaped_with_br() -> None:
    job = compile_flow(SCENARIO_13)
    (data,) = json.loads(job.job_graph.to_json())["nodes"]
    assert data["description"] == (
        "test source<br/>:- x + 1<br/>:  :- first print of map1<br/>:  +- second print of "
        "map1<br/>+- x + 2<br/>   :- first print of map2<br/>   +- second print of map2<br/>"
    )


def _single_vertex_description(name_literal: str) -> str:
    job = compile_flow(
        f"CREATE SOURCE s {SRC}, name = {name_literal}); CREATE SINK o WITH "
        "(connector = 'console', parallelism = 2); INSERT INTO o FROM s;"
    )
    data = json.loads(job.job_graph.to_json())["nodes"]
    (source,) = [n for n in data if "inputs" not in n]
    return str(source["description"])


def test_json_description_escapes_html_specials() -> None:
    assert _single_vertex_description('"a < b & \\"c\\" > d"') == (
        "a &lt; b &amp; &quot;c&quot; &gt; d<br/>"
    )


def test_json_description_replaces_backslash() -> None:
    assert _single_vertex_description("'a\\\\b'") == "a&#92;b<br/>"


def test_json_description_keeps_apostrophe() -> None:
    """commons-lang3 escapeHtml4 leaves the apostrophe alone (it is not an HTML 4 entity)."""
    assert _single_vertex_description('"it\'s"') == "it's<br/>"


def test_json_description_escapes_non_ascii_entities() -> None:
    """escapeHtml4 also escapes ISO-8859-1 and HTML 4.0 extended characters by name."""
    assert _single_vertex_description("'café → x'") == "caf&eacute; &rarr; x<br/>"


# ---------------------------------------------------------------- scenario 14


SCENARIO_14 = """
{settings}
CREATE SOURCE source1 (k BIGINT, v BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
CREATE SOURCE source2 (k BIGINT, v BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
CREATE SINK o1 WITH (connector = 'console', chaining = 'never');
CREATE SINK o2 WITH (connector = 'console', chaining = 'never');
INSERT INTO o1 FROM source1 |> REBALANCE |> SELECT k, v WITH (name = 'map1'{group});
INSERT INTO o2 FROM source2 |> REBALANCE |> SELECT k, v WITH (name = 'map2');
"""


def test_scenario_14_batch_one_slot_sharing_group_per_region() -> None:
    job = compile_flow(SCENARIO_14.format(settings="SET execution.mode = batch;", group=""))
    plan = job.physical_plan
    names = ["Source: source1", "Source: source2", "map1", "map2"]
    assert [n for n in vertex_names(job) if not n.startswith("Sink")] == names
    groups = {physical(job, n).slot_sharing_group for n in names}
    assert len(groups) == 4
    assert len(plan.pipelined_regions) == 6


def test_scenario_14_streaming_default_group_shared_named_group_apart() -> None:
    job = compile_flow(
        SCENARIO_14.format(settings="", group=", slot_sharing_group = 'a'"),
    )
    group = {n: physical(job, n).slot_sharing_group for n in ("Source: source1", "map1")}
    group.update({n: physical(job, n).slot_sharing_group for n in ("Source: source2", "map2")})
    assert group["Source: source1"] == group["Source: source2"] == group["map2"] == "default"
    assert group["map1"] == "a"
    # the sink after map1 inherits its group
    assert physical(job, "Sink: o1").slot_sharing_group == "a"


# ---------------------------------------------------------------- scenario 15 (derived)


def test_scenario_15_batch_blocking_dataset_reuse() -> None:
    # Derived (ALL_EDGES_BLOCKING): one operator's outputs share a dataset when the consumer
    # parallelism, max parallelism, output tag and partitioner agree.
    job = compile_flow(
        f"""
        SET execution.mode = batch;
        CREATE SOURCE s {SRC}, number_of_rows = 10);
        CREATE SINK r1 WITH (connector = 'console', parallelism = 2);
        CREATE SINK r2 WITH (connector = 'console', parallelism = 2);
        CREATE SINK r3 WITH (connector = 'console', parallelism = 3);
        CREATE SINK b1 WITH (connector = 'console', parallelism = 2);
        CREATE SINK b2 WITH (connector = 'console', parallelism = 2);
        INSERT INTO r1 FROM s;
        INSERT INTO r2 FROM s |> REBALANCE;
        INSERT INTO r3 FROM s;
        INSERT INTO b1 FROM s |> BROADCAST;
        INSERT INTO b2 FROM s |> BROADCAST;
        """
    )
    source = vertex(job, "Source: s")
    assert len(source.produced) == 3
    dataset = {v.name: v.inputs[0].source for v in job.job_graph.vertices.values() if v.inputs}
    assert dataset["Sink: r1"] is dataset["Sink: r2"]
    assert dataset["Sink: b1"] is dataset["Sink: b2"]
    assert len({id(d) for d in dataset.values()}) == 3


def test_scenario_15_streaming_pipelined_never_reused() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK r1 WITH (connector = 'console', parallelism = 2);
        CREATE SINK r2 WITH (connector = 'console', parallelism = 2);
        INSERT INTO r1 FROM s;
        INSERT INTO r2 FROM s;
        """
    )
    assert len(vertex(job, "Source: s").produced) == 2


def test_dataset_reuse_is_per_operator_not_per_vertex() -> None:
    """Flink reuses a dataset only among the outputs of one operator (outputsConsumedByEdge
    is kept per source node), never across two operators of one chain."""
    job = compile_flow(
        f"""
        SET execution.mode = batch;
        CREATE SOURCE s {SRC}, number_of_rows = 10);
        CREATE SINK o1 WITH (connector = 'console', parallelism = 2);
        CREATE SINK o2 WITH (connector = 'console', parallelism = 2);
        CREATE VIEW a AS FROM s |> SELECT k, v WITH (name = 'A');
        INSERT INTO o1 FROM s;
        INSERT INTO o2 FROM a;
        """
    )
    producer = vertex(job, "Source: s -> A")
    assert len(producer.produced) == 2
    assert vertex(job, "Sink: o1").inputs[0].source is not vertex(job, "Sink: o2").inputs[0].source


# ---------------------------------------------------------------- scenario 17: operator ids


HASH_PROGRAM = f"""
SET parallelism = 2;
CREATE SOURCE s {SRC});
CREATE SOURCE t {SRC}, parallelism = 3);
CREATE SINK o WITH (connector = 'console');
CREATE SINK p WITH (connector = 'console', parallelism = 4);
CREATE VIEW w AS FROM s |> WHERE v > 0 |> KEY BY k |> AGGREGATE sum(v) AS v;
INSERT INTO o FROM w |> SELECT k, v;
INSERT INTO p FROM t |> UNION ALL w |> REBALANCE |> SELECT k, v WITH (name = 'tail');
"""


def test_scenario_17_same_program_same_ids() -> None:
    first, second = compile_flow(HASH_PROGRAM), compile_flow(HASH_PROGRAM)
    assert operator_ids(first) == operator_ids(second)
    assert list(first.job_graph.vertices) == list(second.job_graph.vertices)
    assert first.job_graph.job_id == second.job_graph.job_id


def test_scenario_17_identical_sources_get_distinct_ids() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s1 {SRC});
        CREATE SOURCE s2 {SRC});
        CREATE SINK o1 WITH (connector = 'console');
        CREATE SINK o2 WITH (connector = 'console');
        INSERT INTO o1 FROM s1 |> SELECT k, v WITH (name = 'm1');
        INSERT INTO o2 FROM s2 |> SELECT k, v WITH (name = 'm2');
        """
    )
    ids = operator_ids(job)
    assert len(set(ids.values())) == 6
    # the first source is hashed first (position 0) with one chained output
    assert ids["Source: s1"] == FIRST_NODE_ONE_CHAINED_OUTPUT


def test_scenario_17_new_chain_changes_ids() -> None:
    base = f"""
    CREATE SOURCE s {SRC});
    CREATE SINK o WITH (connector = 'console');
    INSERT INTO o FROM s |> SELECT k, v |> WHERE v > 0{{hint}};
    """
    chained = compile_flow(base.format(hint=""))
    split = compile_flow(base.format(hint=" WITH (chaining = 'new_chain')"))
    assert vertex_names(chained) == ["Source: s -> Map -> Filter -> Sink: o"]
    assert vertex_names(split) == ["Source: s -> Map", "Filter -> Sink: o"]
    before, after = operator_ids(chained), operator_ids(split)
    assert before["Source: s"] == after["Source: s"]  # still one chained output
    assert before["Map"] != after["Map"]  # lost its chained output
    assert before["Filter"] != after["Filter"]
    assert before["Sink: o"] != after["Sink: o"]


def test_scenario_17_renaming_keeps_ids() -> None:
    renamed = HASH_PROGRAM.replace("name = 'tail'", "name = 'renamed tail'").replace(
        "WHERE v > 0", "WHERE v > 0 WITH (name = 'positive')"
    )
    original, changed = compile_flow(HASH_PROGRAM), compile_flow(renamed)
    assert [original.stream_graph.operator_id(i) for i in sorted(original.stream_graph.nodes)] == [
        changed.stream_graph.operator_id(i) for i in sorted(changed.stream_graph.nodes)
    ]
    assert {n.name for n in changed.stream_graph.nodes.values()} >= {"renamed tail", "positive"}


def test_scenario_17_duplicate_uid_is_an_error() -> None:
    found = errors(
        f"""CREATE SOURCE s {SRC}, uid = 'dup');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> SELECT k, v WITH (uid = 'dup');
"""
    )
    assert [(d.code, d.span.line) for d in found] == [("E0307", 3)]


def test_scenario_17_uid_mid_chain_accepted() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v WITH (uid = 'map') |> WHERE v > 0;
        """
    )
    (only,) = job.job_graph.vertices.values()
    assert only.name == "Source: s -> Map -> Filter -> Sink: o"
    ids = operator_ids(job)
    assert ids["Map"] == UID_MAP_HASH
    assert [op.operator_id for op in only.operators if op.uid == "map"] == [UID_MAP_HASH]
    assert only.id == ids["Source: s"] == FIRST_NODE_ONE_CHAINED_OUTPUT


def test_scenario_17_uid_hash_of_source() -> None:
    job = compile_flow(
        f"CREATE SOURCE s {SRC}, uid = 'source'); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s;"
    )
    assert job.stream_graph.operator_id(node(job, "Source: s").id) == UID_SOURCE_HASH
    (only,) = job.job_graph.vertices.values()
    assert only.id == UID_SOURCE_HASH


def test_first_hashed_node_without_chained_output() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC}, parallelism = 2);
        CREATE SINK o WITH (connector = 'console', parallelism = 4);
        INSERT INTO o FROM s;
        """
    )
    assert vertex(job, "Source: s").id == FIRST_NODE_NO_CHAINED_OUTPUT


def test_first_hashed_node_with_one_chained_output_and_its_map() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v |> KEY BY k |> AGGREGATE sum(v) AS v;
        """
    )
    ids = operator_ids(job)
    assert ids["Source: s"] == FIRST_NODE_ONE_CHAINED_OUTPUT
    assert ids["Map"] == MAP_CHAINED_AFTER_FIRST
    assert vertex(job, "Source: s -> Map").id == FIRST_NODE_ONE_CHAINED_OUTPUT


def test_chaining_disabled_changes_hash_of_first_node() -> None:
    job = compile_flow(
        f"SET chaining = false; CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s |> SELECT k, v;"
    )
    assert vertex_names(job) == ["Source: s", "Map", "Sink: o"]
    assert vertex(job, "Source: s").id == FIRST_NODE_NO_CHAINED_OUTPUT
    assert [(e[2], e[3]) for e in edge_summary(job)] == [("FORWARD", "POINTWISE")] * 2


# ---------------------------------------------------------------- scenario 18


def test_scenario_18_forward_with_parallelism_change() -> None:
    found = errors(
        f"""CREATE SOURCE s {SRC}, parallelism = 2);
CREATE SINK o WITH (connector = 'console', parallelism = 4);
INSERT INTO o FROM s |> FORWARD |> SELECT k, v WITH (parallelism = 4);
"""
    )
    assert [(d.code, d.span.line, d.span.column) for d in found] == [("E0310", 3, 25)]
    assert found[0].message == (
        "Forward partitioning does not allow change of parallelism. Upstream operation: "
        "Source: s-1 parallelism: 2, downstream operation: Map-3 parallelism: 4 You must use "
        "another partitioning strategy, such as broadcast, rebalance, shuffle or global."
    )


def test_scenario_18_node_ids_count_partitions_and_unused_sources() -> None:
    # transformation ids in creation order: a=1, s=2, HASH=3, Map=4, FORWARD=5, Map=6
    found = errors(
        f"""CREATE SOURCE a {SRC});
CREATE SOURCE s {SRC}, parallelism = 2);
CREATE SINK o WITH (connector = 'console', parallelism = 4);
INSERT INTO o FROM s |> KEY BY k |> SELECT k, v |> FORWARD |> SELECT k, v WITH (parallelism = 4);
"""
    )
    assert [d.code for d in found] == ["E0310"]
    assert "Upstream operation: Map-4 parallelism: 1, downstream operation: Map-6 " in (
        found[0].message
    )


def test_forward_between_equal_parallelism_chains() -> None:
    job = compile_flow(
        f"SET parallelism = 3; CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s |> FORWARD |> SELECT k, v;"
    )
    assert vertex_names(job) == ["Source: s -> Map -> Sink: o"]


# ---------------------------------------------------------------- scenario 19


def test_scenario_19_keyed_pipeline() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        CREATE SOURCE S {SRC});
        CREATE SINK X WITH (connector = 'console');
        INSERT INTO X FROM S |> SELECT k, v |> KEY BY k |> AGGREGATE sum(v) AS v;
        """
    )
    assert vertex_names(job) == ["Source: S -> Map", "Keyed Aggregate -> Sink: X"]
    assert edge_summary(job) == [
        (
            "Source: S -> Map",
            "Keyed Aggregate -> Sink: X",
            "HASH",
            "ALL_TO_ALL",
            "pipelined_bounded",
        )
    ]
    plan = job.physical_plan
    assert plan.slots_required == 4
    # forward-free ALL_TO_ALL input: subtask i still lands in the slot of producer subtask i
    assert [s.slot for s in physical(job, "Keyed Aggregate -> Sink: X").subtasks] == [0, 1, 2, 3]
    assert wiring(physical(job, "Keyed Aggregate -> Sink: X")) == [[(0, 3)]] * 4


def test_scenario_19_parallelism_change_rebalances() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE S {SRC}, parallelism = 2);
        CREATE SINK X WITH (connector = 'console', parallelism = 4);
        INSERT INTO X FROM S |> SELECT k, v WITH (parallelism = 4);
        """
    )
    assert edge_summary(job) == [
        ("Source: S", "Map -> Sink: X", "REBALANCE", "ALL_TO_ALL", "pipelined_bounded")
    ]
    assert wiring(physical(job, "Map -> Sink: X")) == [[(0, 1)]] * 4
    assert job.physical_plan.slots_required == 4


RESCALE_2_TO_4 = f"""
CREATE SOURCE S {SRC}, parallelism = 2);
CREATE SINK X WITH (connector = 'console', parallelism = 4);
INSERT INTO X FROM S |> RESCALE |> SELECT k, v WITH (parallelism = 4);
"""


def test_scenario_19_rescale_pointwise_wiring() -> None:
    job = compile_flow(RESCALE_2_TO_4)
    assert edge_summary(job) == [
        ("Source: S", "Map -> Sink: X", "RESCALE", "POINTWISE", "pipelined_bounded")
    ]
    # producer 0 → consumers {0, 1}, producer 1 → consumers {2, 3}
    assert wiring(physical(job, "Map -> Sink: X")) == [[(0, 0)], [(0, 0)], [(1, 1)], [(1, 1)]]
    assert job.physical_plan.slots_required == 4


def test_rescale_slot_assignment_two_pass() -> None:
    """LocalInputPreferredSlotSharingStrategy places a vertex in two passes: first every
    subtask that finds a free producer slot, then the rest in any free slot or a new one."""
    job = compile_flow(RESCALE_2_TO_4)
    assert [s.slot for s in physical(job, "Source: S").subtasks] == [0, 1]
    # Map0 → producer 0's slot, Map2 → producer 1's slot; Map1 and Map3 get new slots
    assert [s.slot for s in physical(job, "Map -> Sink: X").subtasks] == [0, 2, 1, 3]


@pytest.mark.parametrize(
    ("up", "down", "expected"),
    [
        (4, 2, [(0, 1), (2, 3)]),
        (5, 8, [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (3, 3), (3, 3), (4, 4)]),
        (3, 3, [(0, 0), (1, 1), (2, 2)]),
    ],
)
def test_pointwise_wiring(up: int, down: int, expected: list[tuple[int, int]]) -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE S {SRC}, parallelism = {up});
        CREATE SINK X WITH (connector = 'console', parallelism = {down}, chaining = 'never');
        INSERT INTO X FROM S |> RESCALE;
        """
    )
    assert [w for (w,) in wiring(physical(job, "Sink: X"))] == expected


def test_pointwise_5_to_8_fan_out_counts() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE S {SRC}, parallelism = 5);
        CREATE SINK X WITH (connector = 'console', parallelism = 8);
        INSERT INTO X FROM S |> RESCALE;
        """
    )
    fed = [0] * 5
    for first, last in (w for (w,) in wiring(physical(job, "Sink: X"))):
        assert first == last
        fed[first] += 1
    assert fed == [2, 2, 1, 2, 1]


# ---------------------------------------------------------------- scenario 20


def test_scenario_20_slot_sharing_group_inherited() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE S {SRC}, parallelism = 2);
        CREATE SINK X WITH (connector = 'console', parallelism = 4);
        INSERT INTO X FROM S |> SELECT k, v WITH (parallelism = 4, slot_sharing_group = 'a');
        """
    )
    assert node(job, "Sink: X").slot_sharing_group == "a"
    assert node(job, "Source: S").slot_sharing_group == "default"
    assert vertex_names(job) == ["Source: S", "Map -> Sink: X"]
    plan = job.physical_plan
    assert plan.slots_per_group == {"default": 2, "a": 4}
    assert plan.slots_required == 6
    source_slots = {s.slot for s in physical(job, "Source: S").subtasks}
    map_slots = {s.slot for s in physical(job, "Map -> Sink: X").subtasks}
    assert not source_slots & map_slots


def test_different_slot_sharing_groups_do_not_chain() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE S {SRC});
        CREATE SINK X WITH (connector = 'console', slot_sharing_group = 'b');
        INSERT INTO X FROM S |> SELECT k, v WITH (slot_sharing_group = 'a');
        """
    )
    assert vertex_names(job) == ["Source: S", "Map", "Sink: X"]
    assert [(e[2], e[3]) for e in edge_summary(job)] == [("FORWARD", "POINTWISE")] * 2
    assert job.physical_plan.slots_required == 3


def test_inputs_in_different_groups_fall_back_to_default() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE a {SRC}, slot_sharing_group = 'x');
        CREATE SOURCE b {SRC}, slot_sharing_group = 'y');
        CREATE SOURCE c {SRC}, slot_sharing_group = 'x');
        CREATE SINK o WITH (connector = 'console');
        CREATE SINK p WITH (connector = 'console');
        INSERT INTO o FROM a |> UNION ALL b |> SELECT k, v WITH (name = 'ab');
        INSERT INTO p FROM a |> UNION ALL c |> SELECT k, v WITH (name = 'ac');
        """
    )
    assert node(job, "ab").slot_sharing_group == "default"
    assert node(job, "ac").slot_sharing_group == "x"


# ---------------------------------------------------------------- scenario 21 / §4


def _ranges(plan_vertex: flowc.graph.physical.PhysicalVertex) -> list[tuple[int, int] | None]:
    return [s.key_groups for s in plan_vertex.subtasks]


def test_scenario_21_key_group_ranges_128_4() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        SET max_parallelism = 128;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS v;
        """
    )
    keyed = physical(job, "Keyed Aggregate -> Sink: o")
    assert keyed.max_parallelism == 128
    assert _ranges(keyed) == [(0, 31), (32, 63), (64, 95), (96, 127)]
    assert _ranges(physical(job, "Source: s")) == [None] * 4


def test_scenario_21_key_group_ranges_10_3() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS v
          WITH (parallelism = 3, max_parallelism = 10);
        """
    )
    assert _ranges(physical(job, "Keyed Aggregate")) == [(0, 3), (4, 6), (7, 9)]


def test_scenario_21_default_max_parallelism_86_is_256() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 86;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS v;
        """
    )
    keyed = physical(job, "Keyed Aggregate -> Sink: o")
    assert keyed.vertex.max_parallelism is None
    assert keyed.max_parallelism == 256
    ranges = _ranges(keyed)
    assert ranges[0] == (0, 2)
    assert ranges[-1] == (254, 255)
    expected = [((i * 256 + 85) // 86, ((i + 1) * 256 - 1) // 86) for i in range(86)]
    assert ranges == expected
    # and an 85-way keyed operator stays at 128
    small = compile_flow(
        f"SET parallelism = 85; CREATE SOURCE s {SRC}); CREATE SINK o WITH (connector = 'console');"
        " INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS v;"
    )
    assert physical(small, "Keyed Aggregate -> Sink: o").max_parallelism == 128


def test_scenario_21_max_parallelism_below_parallelism_is_an_error() -> None:
    found = errors(
        f"""CREATE SOURCE s {SRC});
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS v
  WITH (parallelism = 8, max_parallelism = 4);
"""
    )
    assert [(d.code, d.span.line) for d in found] == [("E0305", 4)]


def test_scenario_21_global_max_parallelism_below_parallelism_is_an_error() -> None:
    found = errors(
        f"""SET max_parallelism = 4;
SET parallelism = 8;
CREATE SOURCE s {SRC});
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s;
"""
    )
    assert [d.code for d in found] == ["E0305"]


def test_scenario_21_parallelism_zero_is_an_error() -> None:
    found = errors(
        f"""CREATE SOURCE s {SRC});
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 0);
"""
    )
    assert [(d.code, d.span.line) for d in found] == [("E0304", 3)]


def test_global_aggregate_is_non_parallel_with_one_key_group() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> AGGREGATE sum(v) AS v;
        """
    )
    agg = physical(job, "Aggregate")
    assert (agg.vertex.parallelism, agg.max_parallelism) == (1, 1)
    assert _ranges(agg) == [(0, 0)]
    assert [(e[2], e[3]) for e in edge_summary(job)] == [
        ("HASH", "ALL_TO_ALL"),
        ("REBALANCE", "ALL_TO_ALL"),
    ]


# ---------------------------------------------------------------- scenario 22 / §5


def test_scenario_22_streamgraph_json_sinks_last() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK a WITH (connector = 'console');
        CREATE SINK b WITH (connector = 'console');
        INSERT INTO a FROM s |> SELECT k, v;
        INSERT INTO b FROM s |> WHERE v > 0;
        """
    )
    nodes = json.loads(job.stream_graph.to_json())["nodes"]
    # ids: s=1, Map=2, Sink a=3, Filter=4, Sink b=5
    assert [n["id"] for n in nodes] == [1, 2, 4, 3, 5]
    assert [n["pact"] for n in nodes] == [
        "Data Source",
        "Operator",
        "Operator",
        "Data Sink",
        "Data Sink",
    ]
    assert [n["type"] for n in nodes] == ["Source: s", "Map", "Filter", "Sink: a", "Sink: b"]
    assert [n["contents"] for n in nodes] == [n["type"] for n in nodes]
    assert "predecessors" not in nodes[0]
    assert nodes[3]["predecessors"] == [
        {
            "id": 2,
            "ship_strategy": "FORWARD",
            "side": "second",
            "type_number": 0,
            "exchange_mode": "UNDEFINED",
        }
    ]


def test_streamgraph_json_side_is_always_second() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE a {SRC});
        CREATE SOURCE b {SRC}, parallelism = 3);
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM a |> UNION ALL b |> SELECT k, v;
        """
    )
    nodes = {n["id"]: n for n in json.loads(job.stream_graph.to_json())["nodes"]}
    preds = nodes[node(job, "Map").id]["predecessors"]
    assert [(p["id"], p["ship_strategy"], p["side"]) for p in preds] == [
        (1, "FORWARD", "second"),
        (2, "REBALANCE", "second"),
    ]


def test_jobgraph_json_node_order_is_creation_order() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 4;
        CREATE SOURCE S {SRC});
        CREATE SINK X WITH (connector = 'console');
        INSERT INTO X FROM S |> SELECT k, v |> KEY BY k |> AGGREGATE sum(v) AS v;
        """
    )
    data = json.loads(job.job_graph.to_json())
    # vertices are created downstream-first (post-order of createChain)
    assert [n["name"] for n in data["nodes"]] == ["Keyed Aggregate -> Sink: X", "Source: S -> Map"]
    assert vertex_names(job) == ["Source: S -> Map", "Keyed Aggregate -> Sink: X"]
    source, keyed = data["nodes"][1], data["nodes"][0]
    assert "inputs" not in source
    assert keyed["inputs"][0]["id"] == source["id"]
    assert keyed["inputs"][0]["num"] == 0
    assert (keyed["inputs"][0]["ship_strategy"], keyed["inputs"][0]["exchange"]) == (
        "HASH",
        "pipelined_bounded",
    )
    assert source["description"] == "Source: S<br/>+- Map<br/>"
    assert data["type"] == "STREAMING"


FORK_UNEVEN_DEPTH = f"""
CREATE SOURCE s {SRC});
CREATE SINK a WITH (connector = 'console', parallelism = 3);
CREATE SINK b WITH (connector = 'console', parallelism = 4);
INSERT INTO a FROM s |> SELECT k, v WITH (parallelism = 2);
INSERT INTO b FROM s;
"""


def test_fork_vertex_creation_order() -> None:
    job = compile_flow(FORK_UNEVEN_DEPTH)
    assert [v.name for v in job.job_graph.vertices.values()] == [
        "Sink: a",
        "Map",
        "Sink: b",
        "Source: s",
    ]


def test_topological_order_is_depth_first() -> None:
    """getVerticesSortedTopologicallyFromSources descends into a consumer as soon as it is
    added (depth first), before looking at the producer's other consumers."""
    job = compile_flow(FORK_UNEVEN_DEPTH)
    assert vertex_names(job) == ["Source: s", "Map", "Sink: a", "Sink: b"]


# ---------------------------------------------------------------- chaining hints and switch


def test_chaining_never_isolates_the_operator() -> None:
    job = compile_flow(
        f"""
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT k, v WITH (chaining = 'never') |> WHERE v > 0;
        """
    )
    assert vertex_names(job) == ["Source: s", "Map", "Filter -> Sink: o"]
    assert [(e[2], e[3]) for e in edge_summary(job)] == [("FORWARD", "POINTWISE")] * 2


def test_new_chain_on_source_still_chains_downstream() -> None:
    # HEAD on the upstream side is chainable (only the downstream side must be ALWAYS)
    job = compile_flow(
        f"CREATE SOURCE s {SRC}, chaining = 'new_chain'); CREATE SINK o WITH "
        "(connector = 'console'); INSERT INTO o FROM s |> SELECT k, v;"
    )
    assert vertex_names(job) == ["Source: s -> Map -> Sink: o"]


def test_never_on_source_stays_alone() -> None:
    job = compile_flow(
        f"CREATE SOURCE s {SRC}, chaining = 'never'); CREATE SINK o WITH "
        "(connector = 'console'); INSERT INTO o FROM s |> SELECT k, v;"
    )
    assert vertex_names(job) == ["Source: s", "Map -> Sink: o"]


def test_chaining_off_one_vertex_per_operator() -> None:
    job = compile_flow(
        f"""
        SET chaining = false;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        CREATE SINK p WITH (connector = 'console');
        CREATE VIEW m AS FROM s |> SELECT k, v;
        INSERT INTO o FROM m;
        INSERT INTO p FROM m |> WHERE v > 0;
        """
    )
    assert sorted(vertex_names(job)) == ["Filter", "Map", "Sink: o", "Sink: p", "Source: s"]
    assert all(not job.stream_graph.is_chainable(e) for e in job.stream_graph.edges())
    assert job.physical_plan.slots_required == 1


def test_view_read_twice_forks_inside_the_chain() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE s {SRC});
        CREATE SINK o WITH (connector = 'console');
        CREATE SINK p WITH (connector = 'console');
        CREATE VIEW m AS FROM s |> SELECT k, v;
        INSERT INTO o FROM m;
        INSERT INTO p FROM m |> WHERE v > 0;
        """
    )
    assert vertex_names(job) == ["Source: s -> Map -> (Sink: o, Filter -> Sink: p)"]
    assert [n.name for n in job.stream_graph.nodes.values()].count("Map") == 1


def test_join_inputs_use_type_numbers_one_and_two() -> None:
    job = compile_flow(
        f"""
        SET parallelism = 2;
        CREATE SOURCE a {SRC});
        CREATE SOURCE b (id BIGINT, w BIGINT) WITH (connector = 'datagen');
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM a |> JOIN b ON a.k = b.id;
        """
    )
    join = node(job, "Join")
    assert [(e.type_number, e.partitioner) for e in join.in_edges] == [(1, "HASH"), (2, "HASH")]
    assert vertex_names(job) == ["Source: a", "Source: b", "Join -> Sink: o"]
    assert _ranges(physical(job, "Join -> Sink: o")) == [(0, 63), (64, 127)]
