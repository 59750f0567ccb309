"""Every stage in every format, for every example: snapshots plus structural checks.

The snapshots pin the exact output; the structural tests state the contract of
../shared/spec/plans.md and Flink's plan formats, so that a wrong snapshot accepted
with ``--snapshot-update`` still fails here.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from stages import COMBINATIONS, COMPILED_EXAMPLES, EMITTED, ROOT, STAGE_FORMATS, emitted_file

import flowc
from flowc.cli.main import main
from tests.helpers.snapshots import PerExampleSnapshot, example_id

#: Every example, the Flink-dialect ones too.
EXAMPLES = COMPILED_EXAMPLES
GRAPH_STAGES = ("transformations", "streamgraph", "jobgraph")

SHIP_STRATEGIES = {
    "FORWARD",
    "REBALANCE",
    "RESCALE",
    "HASH",
    "BROADCAST",
    "GLOBAL",
    "SHUFFLE",
    "CUSTOM",
}
POINTWISE_STRATEGIES = {"FORWARD", "RESCALE"}
HEX32 = re.compile(r"[0-9a-f]{32}")


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _emit(
    path: Path,
    stage: str,
    fmt: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """``flowc compile`` in-process from the repository root, with a relative path."""
    monkeypatch.chdir(ROOT)
    code = main(["compile", _relative(path), "--emit", stage, "--format", fmt])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _emit_json(
    path: Path,
    stage: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_emit(path, stage, "json", capsys, monkeypatch))
    return document


# ------------------------------------------------------------------ snapshots


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
@pytest.mark.parametrize(("stage", "fmt"), COMBINATIONS, ids=[f"{s}-{f}" for s, f in COMBINATIONS])
def test_stage_snapshot(
    path: Path,
    stage: str,
    fmt: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    snapshot: Any,
) -> None:
    out = _emit(path, stage, fmt, capsys, monkeypatch)
    if fmt == "json":
        document = json.loads(out)
        assert document.pop("flowc_version") == flowc.__version__
        # Re-serialised in the document's own key order: syrupy would sort a dict's keys,
        # and the order of keys is part of the Flink-compatible schemas.
        out = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    assert out == snapshot(extension_class=PerExampleSnapshot)


def test_each_example_has_a_snapshot_file_of_its_own() -> None:
    """One file per example (tests/helpers/snapshots.py), none left of a removed one."""
    folder = Path(__file__).parent / "__snapshots__" / "test_stage_snapshots"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{example_id(e)}.ambr" for e in EXAMPLES
    )


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 5
    assert all("errors" not in p.parts for p in EXAMPLES)


# ------------------------------------------------------------------ JSON envelope


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_json_documents_start_with_version_keys(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for stage, formats in STAGE_FORMATS.items():
        if "json" not in formats:
            continue
        document = _emit_json(path, stage, capsys, monkeypatch)
        assert list(document)[:3] == ["flowc_version", "schema_version", "stage"], stage
        assert document["flowc_version"] == flowc.__version__
        assert document["schema_version"] == (2 if stage == "physical" else 1)
        assert document["stage"] == stage


# ------------------------------------------------------------------ spans


def _assert_span(span: Any, path: Path, lines: list[str], where: str) -> None:
    assert isinstance(span, dict), f"{where}: no span"
    assert span["file"] == _relative(path), where
    line, column = span["line"], span["column"]
    assert isinstance(line, int) and isinstance(column, int), where
    assert 1 <= line <= len(lines), f"{where}: line {line} outside the file"
    assert 1 <= column <= len(lines[line - 1]) + 1, f"{where}: column {column} outside line"
    assert (span["end_line"], span["end_column"]) >= (line, column), where


def _assert_points_at_declaration(name: str, span: dict[str, Any], lines: list[str]) -> None:
    """Default-named sources point at their CREATE SOURCE, sinks at their INSERT INTO."""
    text = lines[span["line"] - 1][span["column"] - 1 :]
    if name.startswith("Source: "):
        assert re.match(rf"CREATE\s+(?:SOURCE|TABLE)\s+{re.escape(name[8:])}\b", text), (name, text)
    elif name.startswith("Sink: "):
        assert re.match(rf"INSERT\s+INTO\s+{re.escape(name[6:])}\b", text), (name, text)


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_every_plan_node_carries_a_span(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()

    transformations = _emit_json(path, "transformations", capsys, monkeypatch)
    for t in transformations["transformations"]:
        _assert_span(t.get("span"), path, lines, f"transformation {t['id']}")

    stream_graph = _emit_json(path, "streamgraph", capsys, monkeypatch)
    for node in stream_graph["nodes"]:
        _assert_span(node.get("span"), path, lines, f"stream node {node['id']}")
        _assert_points_at_declaration(node["type"], node["span"], lines)

    job_graph = _emit_json(path, "jobgraph", capsys, monkeypatch)
    for vertex in job_graph["nodes"]:
        _assert_span(vertex.get("span"), path, lines, f"vertex {vertex['name']}")
        for operator in vertex["operators"]:
            where = f"operator {operator['name']}"
            _assert_span(operator.get("span"), path, lines, where)
            _assert_points_at_declaration(operator["name"], operator["span"], lines)

    physical = _emit_json(path, "physical", capsys, monkeypatch)
    for vertex in physical["vertices"]:
        _assert_span(vertex.get("span"), path, lines, f"physical vertex {vertex['name']}")


# ------------------------------------------------------------------ streamgraph JSON


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_streamgraph_json_matches_flinks_execution_plan_schema(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = _emit_json(path, "streamgraph", capsys, monkeypatch)["nodes"]
    assert nodes
    ids = [node["id"] for node in nodes]
    assert len(set(ids)) == len(ids)
    for node in nodes:
        # JSONGenerator's fields, in its order, first.
        assert list(node)[:5] == ["id", "type", "pact", "contents", "parallelism"], node
        assert isinstance(node["id"], int)
        assert isinstance(node["type"], str) and node["type"]
        assert isinstance(node["contents"], str) and node["contents"]
        assert isinstance(node["parallelism"], int) and node["parallelism"] >= 1
        assert node["pact"] in ("Data Source", "Operator", "Data Sink")
        if node["pact"] == "Data Source":
            assert "predecessors" not in node
            continue
        assert node["predecessors"], f"node {node['id']} has no predecessors"
        for predecessor in node["predecessors"]:
            assert list(predecessor)[:3] == ["id", "ship_strategy", "side"]
            assert predecessor["id"] in ids, "virtual or unknown node referenced"
            assert predecessor["ship_strategy"] in SHIP_STRATEGIES
            assert predecessor["side"] == "second"

    # Node order: every non-sink by ascending id, then every sink by ascending id.
    sinks = [node["id"] for node in nodes if node["pact"] == "Data Sink"]
    others = [node["id"] for node in nodes if node["pact"] != "Data Sink"]
    assert sinks, "every example writes to a sink"
    assert ids == sorted(others) + sorted(sinks)


# ------------------------------------------------------------------ jobgraph JSON


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_jobgraph_json_inputs_and_chains(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _emit_json(path, "jobgraph", capsys, monkeypatch)
    assert HEX32.fullmatch(document["jid"])
    batch = "SET execution.mode = batch;" in path.read_text(encoding="utf-8")
    assert document["type"] == ("BATCH" if batch else "STREAMING")
    vertices = document["nodes"]
    position = {vertex["id"]: i for i, vertex in enumerate(vertices)}
    assert len(position) == len(vertices)
    for vertex in vertices:
        assert HEX32.fullmatch(vertex["id"])
        operators = vertex["operators"]
        assert operators, vertex["name"]
        assert operators[0]["id"] == vertex["id"], "the head's OperatorID is the JobVertexID"
        assert all(HEX32.fullmatch(op["id"]) for op in operators)
        if " -> (" not in vertex["name"]:  # a linear chain: A -> B -> C
            assert vertex["name"] == " -> ".join(op["name"] for op in operators)
        for num, edge in enumerate(vertex.get("inputs", [])):
            assert edge["num"] == num
            assert edge["id"] in position, "input from an unknown vertex"
            assert edge["ship_strategy"] in SHIP_STRATEGIES
            expected = (
                "POINTWISE" if edge["ship_strategy"] in POINTWISE_STRATEGIES else "ALL_TO_ALL"
            )
            assert edge["distribution"] == expected, edge
            assert edge["exchange"] == ("blocking" if batch else "pipelined_bounded")
            # JobGraph.getVertices() is creation order, and chains are created
            # downstream-first: every consumer comes before its producers.
            assert position[vertex["id"]] < position[edge["id"]], (vertex["name"], edge)


def test_examples_cover_every_ship_strategy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keeps the distribution test above meaningful: each strategy is seen at least once."""
    seen: set[tuple[str, str]] = set()
    for path in EXAMPLES:
        for vertex in _emit_json(path, "jobgraph", capsys, monkeypatch)["nodes"]:
            seen.update((e["ship_strategy"], e["distribution"]) for e in vertex.get("inputs", []))
    assert {strategy for strategy, _ in seen} == SHIP_STRATEGIES
    assert ("FORWARD", "POINTWISE") in seen
    assert ("RESCALE", "POINTWISE") in seen


# ------------------------------------------------------------------ physical JSON


def _default_max_parallelism(parallelism: int) -> int:
    """KeyGroupRangeAssignment.computeDefaultMaxParallelism."""
    rounded = 1 << (parallelism + parallelism // 2 - 1).bit_length()
    return min(max(rounded, 128), 32768)


def _expand(runs: list[dict[str, Any]], key: str, share: str, count: int) -> list[list[int]]:
    """Per subtask, the inclusive range a list of runs gives it (docs/plans.md): ``share`` is
    ``"all"`` (each subtask gets the whole range), ``"ceil"`` (Flink's key-group rule within
    the run) or ``"floor"`` (Flink's pointwise rule within the run)."""
    ranges: list[list[int]] = []
    for run in runs:
        first, last = run["subtasks"]
        low, high = run[key]
        assert first == len(ranges) and first <= last and low <= high, run
        n, k = last - first + 1, high - low + 1
        for j in range(n):
            if share == "all":
                ranges.append([low, high])
            elif share == "ceil":
                ranges.append([low + -(-j * k // n), low + -(-(j + 1) * k // n) - 1])
            else:
                start = j * k // n
                ranges.append([low + start, low + max(start, (j + 1) * k // n - 1)])
    assert len(ranges) == count
    return ranges


def _expand_slots(runs: list[dict[str, Any]], count: int) -> list[int]:
    slots: list[int] = []
    for run in runs:
        first, last = run["subtasks"]
        assert first == len(slots) and first <= last, run
        slots.extend(run["slots"][0] + j * run["step"] for j in range(last - first + 1))
        assert slots[-1] == run["slots"][1], run
    assert len(slots) == count
    return slots


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_physical_plan_is_consistent_with_the_jobgraph(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_vertices = {v["id"]: v for v in _emit_json(path, "jobgraph", capsys, monkeypatch)["nodes"]}
    physical = _emit_json(path, "physical", capsys, monkeypatch)
    vertices = physical["vertices"]
    assert {v["id"] for v in vertices} == set(job_vertices)
    parallelism = {v["id"]: v["parallelism"] for v in vertices}

    group_sizes: dict[str, int] = {}
    slot_owner: dict[int, str] = {}
    for vertex in vertices:
        job_vertex = job_vertices[vertex["id"]]
        p = vertex["parallelism"]
        # A BATCH vertex Flink sizes at run time says -1, and flowc plans its bound
        # (docs/plans.md, "Batch mode: Flink's adaptive batch JobGraph").
        assert p == job_vertex.get("planned_parallelism", job_vertex["parallelism"])
        expected_max = job_vertex["max_parallelism"] or _default_max_parallelism(p)
        assert vertex["max_parallelism"] == expected_max, vertex["name"]
        group = vertex["slot_sharing_group"]
        group_sizes[group] = max(group_sizes.get(group, 0), p)
        slots = _expand_slots(vertex["slots"], p)
        assert len(set(slots)) == p, "a slot holds at most one subtask of each vertex"
        for slot in slots:
            assert slot_owner.setdefault(slot, group) == group, "slot in two groups"
        if vertex["keyed"]:
            key_groups = _expand(vertex["key_groups"], "key_groups", "ceil", p)
            for i in range(p):  # KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex
                start, end = (i * expected_max + p - 1) // p, ((i + 1) * expected_max - 1) // p
                assert key_groups[i] == [start, end], (vertex["name"], i)
        else:
            assert vertex["key_groups"] is None
        edges = job_vertex.get("inputs", [])
        assert [(i["vertex"], i["ship_strategy"], i["distribution"]) for i in vertex["inputs"]] == [
            (e["id"], e["ship_strategy"], e["distribution"]) for e in edges
        ]
        for physical_input in vertex["inputs"]:
            up = parallelism[physical_input["vertex"]]
            pointwise = physical_input["distribution"] == "POINTWISE"
            reads = _expand(
                physical_input["producers"], "producers", "floor" if pointwise else "all", p
            )
            for j, (first, last) in enumerate(reads):
                if not pointwise:
                    assert (first, last) == (0, up - 1)
                elif up >= p:  # VertexInputInfoComputationUtils
                    assert (first, last) == (j * up // p, (j + 1) * up // p - 1)
                else:
                    assert first == last == j * up // p

    assert physical["slot_sharing_groups"] == group_sizes
    assert physical["slots_required"] == sum(group_sizes.values())
    assert set(slot_owner) == set(range(physical["slots_required"]))
    regions = physical["pipelined_regions"]
    assert sorted(v for region in regions for v in region) == sorted(job_vertices)


def test_physical_plan_includes_the_spark_realization(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spark = _emit_json(ROOT / "examples" / "wordcount.flow", "physical", capsys, monkeypatch)[
        "spark"
    ]
    assert isinstance(spark, dict)
    assert isinstance(spark["queries"], list) and spark["queries"]
    assert isinstance(spark["shuffle_partitions"], int)
    assert isinstance(spark["exchanges"], list)


# ------------------------------------------------------------------ --emit all


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_emit_all_writes_every_stage_in_every_format(
    path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    target = tmp_path / "out"
    assert main(["compile", _relative(path), "--emit", "all", "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    expected = {emitted_file(stage, fmt) for stage, fmt in EMITTED}
    assert {p.name for p in target.iterdir()} == expected
    for stage, fmt in EMITTED:
        written = (target / emitted_file(stage, fmt)).read_text(encoding="utf-8")
        if fmt == "json":
            assert json.loads(written)["stage"] == stage
        assert written == _emit(path, stage, fmt, capsys, monkeypatch), (stage, fmt)


# ------------------------------------------------------------------ DOT and Mermaid


_DOT_TOKEN = re.compile(
    r'(?P<ws>\s+)|(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->)|(?P<punct>[{}\[\];=,])'
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*|-?[0-9]+(?:\.[0-9]+)?)",
    re.S,
)


def _dot_unescape(token: str) -> str:
    """A DOT quoted string as a Graphviz label reads it; only \\", \\\\ and \\n may occur."""
    body, out, i = token[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            escape = body[i + 1]
            assert escape in '"\\n', f"ambiguous escape \\{escape} in {token}"
            out.append("\n" if escape == "n" else escape)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


@dataclass
class DotGraph:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)


def parse_dot(text: str) -> DotGraph:
    """A strict parser for the subset of DOT flowc writes; fails on anything malformed."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _DOT_TOKEN.match(text, pos)
        assert match, f"DOT: unreadable at {text[pos : pos + 40]!r}"
        if match.lastgroup != "ws":
            assert match.lastgroup is not None
            tokens.append((match.lastgroup, match.group()))
        pos = match.end()
    i = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal i
        assert i < len(tokens), f"DOT: expected {value or kind}, got the end"
        got_kind, got = tokens[i]
        assert got_kind == kind and (value is None or got == value), (
            f"DOT: expected {value or kind}, got {got!r}"
        )
        i += 1
        return got

    def peek(value: str) -> bool:
        return i < len(tokens) and tokens[i][1] == value

    def atom() -> str:
        kind = tokens[i][0] if i < len(tokens) else "end"
        return _dot_unescape(take("str")) if kind == "str" else take("id")

    def attributes() -> dict[str, str]:
        found: dict[str, str] = {}
        if not peek("["):
            return found
        take("punct", "[")
        while not peek("]"):
            key = take("id")
            take("punct", "=")
            found[key] = atom()
            if peek(","):
                take("punct", ",")
        take("punct", "]")
        return found

    take("id", "digraph")
    graph = DotGraph(name=atom())
    take("punct", "{")
    while not peek("}"):
        first = take("id")
        if peek("="):
            take("punct", "=")
            atom()
        elif first in ("node", "edge", "graph"):
            attributes()
        elif peek("->"):
            take("arrow")
            graph.edges.append((first, take("id")))
            attributes()
        else:
            assert first not in graph.labels, f"DOT: node {first} declared twice"
            graph.labels[first] = attributes()["label"]
        take("punct", ";")
    take("punct", "}")
    assert i == len(tokens), "DOT: text after the graph"
    return graph


_MERMAID_NODE = re.compile(
    r'  (?P<id>[A-Za-z][A-Za-z0-9_]*)(?P<open>\[|\(\[)"(?P<label>[^"]*)"(?P<close>\]|\]\))'
)
_MERMAID_EDGE = re.compile(
    r"  (?P<source>[A-Za-z][A-Za-z0-9_]*) -->(?:\|[^|\"\n]*\|)? (?P<target>[A-Za-z][A-Za-z0-9_]*)"
)


def parse_mermaid(text: str) -> dict[str, str]:
    """Mermaid node ids and their raw (still escaped) labels; fails on malformed lines."""
    lines = text.splitlines()
    assert re.fullmatch(r"flowchart (LR|TD|TB|RL|BT)", lines[0]), lines[0]
    labels: dict[str, str] = {}
    edges = []
    for line in lines[1:]:
        node = _MERMAID_NODE.fullmatch(line)
        if node:
            assert (node["open"], node["close"]) in (("[", "]"), ("([", "])")), line
            assert node["id"] not in labels
            labels[node["id"]] = node["label"]
            continue
        edge = _MERMAID_EDGE.fullmatch(line)
        assert edge, f"Mermaid: malformed line {line!r}"
        edges.append((edge["source"], edge["target"]))
    assert all(s in labels and t in labels for s, t in edges), "edge to an undeclared node"
    return labels


def _mermaid_unescape(label: str) -> str:
    """What Mermaid shows: <br/> is a line break, entities are decoded."""
    label = re.sub(r"#(\d+);", lambda m: f"&#{m[1]};", label)  # Mermaid's own entity codes
    label = re.sub(r"#([A-Za-z]+);", lambda m: f"&{m[1]};", label)
    return html.unescape(label.replace("<br/>", "\n"))


#: Transformations that become no StreamNode (Flink's virtual partition/side-output, union).
VIRTUAL_KINDS = ("partition", "side_output", "union")


def _expected_labels(job: flowc.CompiledJob, stage: str) -> list[str]:
    """What each node of a graph stage should show, sorted: its name, then its parallelism."""
    if stage == "transformations":
        data = json.loads(job.transformations.to_json())["transformations"]
        labels = [
            f"{t['id']}: {t['name']}"
            + ("" if t["kind"] in VIRTUAL_KINDS else f"\np={t['parallelism']}")
            for t in data
        ]
    elif stage == "streamgraph":
        nodes = json.loads(job.stream_graph.to_json())["nodes"]
        labels = [f"{n['type']}\np={n['parallelism']}" for n in nodes]
    else:
        vertices = json.loads(job.job_graph.to_json())["nodes"]
        labels = [
            f"{v['name']}\np={v.get('planned_parallelism', v['parallelism'])}" for v in vertices
        ]
    return sorted(labels)


def _stage_ir(job: flowc.CompiledJob, stage: str) -> Any:
    return {
        "transformations": job.transformations,
        "streamgraph": job.stream_graph,
        "jobgraph": job.job_graph,
    }[stage]


def _flow_string(text: str) -> str:
    """A .flow string literal for ``text``."""
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n").replace("'", "''")
    return f"'{escaped}'"


HOSTILE_JOB = 'job "x" \\ y\nz'
HOSTILE_NAMES = {
    "source": 'src "q" \\ <script>alert(1)</script>',
    "filter": 'a "quoted" \\ back\nslash <b>&amp; --> ] end; it\'s',
    "select": 'x["y"] --> z \\n \\',
    "sink": 'sink ] ) } --> "',
}
HOSTILE = f"""
SET parallelism = 2;
SET job.name = {_flow_string(HOSTILE_JOB)};
CREATE SOURCE s (k BIGINT)
  WITH (connector = 'datagen', name = {_flow_string(HOSTILE_NAMES["source"])});
CREATE SINK o WITH (connector = 'console', name = {_flow_string(HOSTILE_NAMES["sink"])});
INSERT INTO o FROM s
  |> WHERE k > 0 WITH (name = {_flow_string(HOSTILE_NAMES["filter"])}, chaining = 'never')
  |> SELECT k WITH (name = {_flow_string(HOSTILE_NAMES["select"])}, parallelism = 3);
"""


def _jobs() -> list[tuple[str, flowc.CompiledJob]]:
    jobs = [(p.stem, flowc.compile(p.read_text(encoding="utf-8"), _relative(p))) for p in EXAMPLES]
    return [*jobs, ("hostile", flowc.compile(HOSTILE, "hostile.flow"))]


def test_hostile_names_are_used_verbatim() -> None:
    job = flowc.compile(HOSTILE, "hostile.flow")
    vertices = json.loads(job.job_graph.to_json())
    assert vertices["name"] == HOSTILE_JOB
    assert sorted(v["name"] for v in vertices["nodes"]) == sorted(HOSTILE_NAMES.values())


@pytest.mark.parametrize("stage", GRAPH_STAGES)
def test_dot_is_well_formed_and_labels_round_trip(stage: str) -> None:
    for name, job in _jobs():
        text = _stage_ir(job, stage).to_dot()
        assert text.startswith("digraph ") and text.endswith("}\n"), name
        graph = parse_dot(text)
        assert graph.name == job.job_graph.name, name
        assert sorted(graph.labels.values()) == _expected_labels(job, stage), name
        assert all(s in graph.labels and t in graph.labels for s, t in graph.edges), name


@pytest.mark.parametrize("stage", GRAPH_STAGES)
def test_mermaid_is_well_formed_without_raw_quotes_or_markup(stage: str) -> None:
    for name, job in _jobs():
        text = _stage_ir(job, stage).to_mermaid()
        assert text.startswith("flowchart "), name
        labels = parse_mermaid(text)  # a raw " would end the label early: malformed line
        assert len(labels) == len(_expected_labels(job, stage)), name
        for label in labels.values():
            markup = label.replace("<br/>", "")
            assert "<" not in markup and ">" not in markup, f"{name}: raw markup in {label!r}"


@pytest.mark.parametrize("stage", GRAPH_STAGES)
def test_mermaid_labels_round_trip(stage: str) -> None:
    for name, job in _jobs():
        labels = parse_mermaid(_stage_ir(job, stage).to_mermaid())
        shown = sorted(_mermaid_unescape(label) for label in labels.values())
        assert shown == _expected_labels(job, stage), name


@pytest.mark.parametrize("stage", GRAPH_STAGES)
def test_mermaid_labels_have_no_raw_closing_bracket(stage: str) -> None:
    job = flowc.compile(HOSTILE, "hostile.flow")
    for label in parse_mermaid(_stage_ir(job, stage).to_mermaid()).values():
        assert "]" not in label, label
