"""The plan viewer: one self-contained HTML page for a graph stage (``--format html``).

The graph is laid out in Python with grandalf's Sugiyama layout (layers turned to run
left to right), drawn as inline SVG: a box per node (a JobGraph vertex lists its chained
operators), each edge labelled with its ship strategy and keys. Clicking a box shows what
the plans know of it: its source lines, the schema it outputs, parallelism, slot sharing
group, key groups, and the Spark exchange of each edge into it; the physical plan's Spark
realization is beside the graph. Everything is in the one file (no network, no CDN), the
same input gives the same bytes, and every text from the program reaches the page
escaped (HTML in Python, ``textContent`` in the script), so a name is never markup.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

from flowc.fast_dataclass import dataclass
from flowc.program import Schema, Stream

if TYPE_CHECKING:
    from flowc.job import CompiledJob
    from flowc.spans import Span

#: Nodes the viewer lays out at most: Sugiyama's crossing reduction grows faster than
#: linearly, and a page of thousands of boxes is no longer read (docs/viewer.md).
MAX_VIEW_NODES = 1500
GRAPH_STAGES = ("transformations", "streamgraph", "jobgraph")

_CHAR_WIDTH = 7.2
_LINE_HEIGHT = 16
_PADDING = 10
_LAYER_GAP = 120
_NODE_GAP = 30


class TooLargeToView(ValueError):
    """A graph past :data:`MAX_VIEW_NODES`."""


@dataclass(frozen=True, slots=True)
class Box:
    """A node as drawn: ``lines`` in the box, ``details`` shown on a click."""

    id: str
    title: str
    lines: tuple[str, ...]
    details: tuple[tuple[str, str], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Arrow:
    source: str
    target: str
    label: str


@dataclass(frozen=True, slots=True)
class Placed:
    box: Box
    x: float
    y: float
    width: float
    height: float


def render_html(job: CompiledJob, stage: str) -> str:
    """The page of ``stage`` (one of :data:`GRAPH_STAGES`)."""
    boxes, arrows = _GRAPHS[stage](job)
    if len(boxes) > MAX_VIEW_NODES:
        raise TooLargeToView(
            f"the {stage} has {len(boxes)} nodes; the HTML viewer lays out at most "
            f"{MAX_VIEW_NODES}: use --format dot or mermaid"
        )
    placed = layout(boxes, arrows)
    return _page(job, stage, placed, arrows)


# ---------------------------------------------------------------- the graphs


def _schemas(job: CompiledJob) -> dict[int, Schema]:
    """The schema each StreamGraph node (and transformation) outputs."""
    program = job.program
    tree = job.transformations
    found: dict[int, Schema] = {}
    for source in program.sources:
        node = tree.source_nodes.get(source.name)
        if node is not None:
            found[node] = source.output_schema
    for insert, sink in zip(program.inserts, job.stream_graph.sinks, strict=True):
        found[sink] = insert.stream.schema  # a sink writes what its query outputs
    streams: list[Stream] = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    while streams:
        stream = streams.pop()
        for step in stream.steps:
            node = tree.step_nodes.get(id(step))
            if node is not None:
                found.setdefault(node, step.schema)
            streams.extend(step.inputs)
    return found


def _schema_text(schema: Schema | None) -> str:
    if schema is None:
        return "(not known here)"
    return "\n".join(f"{c.name}  {c.type}" for c in schema)


def _transformation_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    tree = job.transformations
    schemas = _schemas(job)
    boxes, arrows = [], []
    for t in tree.transformations.values():
        details = [
            ("transformation", f"{t.id} ({t.kind.value})"),
            ("parallelism", str(t.parallelism)),
            ("max parallelism", str(t.max_parallelism or "unset")),
            ("slot sharing group", t.slot_sharing_group or "default"),
            ("uid", t.uid or "none"),
        ]
        if t.partitioner is not None:
            details.append(("partitioner", _with_keys(str(t.partitioner), t.keys)))
        details.append(("schema", _schema_text(schemas.get(t.id))))
        group = f", slot group '{t.slot_sharing_group}'" if t.slot_sharing_group else ""
        boxes.append(
            Box(f"t{t.id}", t.name, (f"p={t.parallelism}{group}",), tuple(details), t.span)
        )
        arrows += [Arrow(f"t{i}", f"t{t.id}", "") for i in t.inputs]
    return boxes, arrows


def _stream_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    graph = job.stream_graph
    spark = job.spark_plan
    schemas = _schemas(job)
    boxes, arrows = [], []
    for node in graph.nodes.values():
        details = [
            ("stream node", f"{node.id} ({node.operator})"),
            ("parallelism", str(node.parallelism)),
            ("max parallelism", str(node.max_parallelism or "unset")),
            ("slot sharing group", node.slot_sharing_group),
            ("keys", ", ".join(node.keys) or "none"),
            ("schema", _schema_text(schemas.get(node.id))),
        ]
        for edge in node.in_edges:
            producer = graph.nodes[edge.source_id]
            exchange = spark.exchange(edge.source_id, edge.target_id)
            details.append(
                (
                    f"in from {producer.name}",
                    _with_keys(str(edge.partitioner), edge.keys)
                    + (f"\nSpark: {exchange.spark}: {exchange.why}" if exchange else ""),
                )
            )
            arrows.append(
                Arrow(
                    f"n{edge.source_id}",
                    f"n{node.id}",
                    _with_keys(str(edge.partitioner), edge.keys),
                )
            )
        boxes.append(
            Box(
                f"n{node.id}",
                node.name,
                (f"p={node.parallelism}, slot group '{node.slot_sharing_group}'",),
                tuple(details),
                node.span,
            )
        )
    return boxes, arrows


def _job_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    graph = job.job_graph
    spark = job.spark_plan
    schemas = _schemas(job)
    physical = {v.vertex.id: v for v in job.physical_plan.vertices}
    boxes, arrows = [], []
    for vertex in graph.vertices.values():
        runs = physical[vertex.id].key_groups
        key_groups = (
            "\n".join(f"subtasks {r.first}-{r.last}: key groups {r.low}-{r.high}" for r in runs)
            if runs
            else "not keyed"
        )
        last = vertex.operators[-1].node_id
        details = [
            ("vertex", vertex.id),
            ("parallelism", str(vertex.parallelism)),
            ("max parallelism", str(physical[vertex.id].max_parallelism)),
            ("slot sharing group", vertex.slot_sharing_group),
            ("key groups", key_groups),
            ("operators", "\n".join(f"{op.name} (line {op.span.line})" for op in vertex.operators)),
            ("schema", _schema_text(schemas.get(last))),
        ]
        for edge in vertex.inputs:
            producer = graph.vertices[edge.producer]
            stream_edge = edge.stream_edge
            exchange = spark.exchange(stream_edge.source_id, stream_edge.target_id)
            label = _with_keys(str(edge.ship_strategy), stream_edge.keys)
            details.append(
                (
                    f"in from {producer.name}",
                    f"{label}, {edge.distribution}, {edge.exchange}"
                    + (f"\nSpark: {exchange.spark}: {exchange.why}" if exchange else ""),
                )
            )
            arrows.append(Arrow(edge.producer, vertex.id, label))
        lines = (
            *(op.name for op in vertex.operators),
            f"p={vertex.parallelism}, slot group '{vertex.slot_sharing_group}'",
        )
        boxes.append(Box(vertex.id, vertex.name, lines, tuple(details), vertex.span))
    return boxes, arrows


def _with_keys(strategy: str, keys: tuple[str, ...]) -> str:
    return f"{strategy}({', '.join(keys)})" if keys else strategy


_GRAPHS = {
    "transformations": _transformation_graph,
    "streamgraph": _stream_graph,
    "jobgraph": _job_graph,
}


# ---------------------------------------------------------------- layout


class _View:
    """grandalf's view of a vertex: its size in, its centre out."""

    def __init__(self, w: float, h: float) -> None:
        self.w = w
        self.h = h
        self.xy = (0.0, 0.0)


#: Characters of a line in a box; the whole text is in the details.
_BOX_CHARS = 56


def _shown(line: str) -> str:
    return line if len(line) <= _BOX_CHARS else line[: _BOX_CHARS - 1] + "…"


def _size(box: Box) -> tuple[float, float]:
    text = [box.title, *box.lines]
    width = max(len(_shown(line)) for line in text) * _CHAR_WIDTH + 2 * _PADDING
    height = len(text) * _LINE_HEIGHT + 2 * _PADDING
    return width, height


def layout(boxes: list[Box], arrows: list[Arrow]) -> list[Placed]:
    """Each box's top-left corner: Sugiyama layers left to right, components one under
    the other. grandalf lays layers out top to bottom, so it is given each box turned
    (width as height) and its coordinates are turned back."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    vertices = {b.id: Vertex(b.id) for b in boxes}
    sizes = {b.id: _size(b) for b in boxes}
    for vertex in vertices.values():
        width, height = sizes[vertex.data]
        vertex.view = _View(height, width)  # turned
    edges = [
        Edge(vertices[a.source], vertices[a.target])
        for a in arrows
        if a.source in vertices and a.target in vertices and a.source != a.target
    ]
    graph = Graph(list(vertices.values()), edges)
    placed: list[Placed] = []
    top = 0.0
    by_id = {b.id: b for b in boxes}
    for component in graph.C:
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace = _NODE_GAP
        sugiyama.yspace = _LAYER_GAP
        sugiyama.init_all()
        sugiyama.draw()
        corners = []
        for vertex in component.sV:
            width, height = sizes[vertex.data]
            across, along = vertex.view.xy  # grandalf's x runs across a layer
            corners.append((vertex.data, along - width / 2, across - height / 2, width, height))
        low_x = min(c[1] for c in corners)
        low_y = min(c[2] for c in corners)
        for key, x, y, width, height in corners:
            placed.append(Placed(by_id[key], x - low_x + 20, y - low_y + top + 20, width, height))
        top = max(p.y + p.height for p in placed) + _LAYER_GAP / 2
    order = {b.id: i for i, b in enumerate(boxes)}
    return sorted(placed, key=lambda p: order[p.box.id])


# ---------------------------------------------------------------- the page


def _excerpt(source: str, span: Span) -> list[list[object]]:
    lines = source.splitlines()
    first, last = span.line, min(span.end_line, span.line + 12)
    return [[n, lines[n - 1]] for n in range(first, last + 1) if 0 < n <= len(lines)]


def _json_for_script(data: object) -> str:
    """JSON inside <script>: '<', '>' and '&' as escapes, so no text can end the element."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _svg(placed: list[Placed], arrows: list[Arrow]) -> str:
    at = {p.box.id: p for p in placed}
    width = max((p.x + p.width for p in placed), default=0) + 40
    height = max((p.y + p.height for p in placed), default=0) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/>'
        "</marker></defs>",
    ]
    for arrow in arrows:
        a, b = at.get(arrow.source), at.get(arrow.target)
        if a is None or b is None:
            continue
        x1, y1 = a.x + a.width, a.y + a.height / 2
        x2, y2 = b.x, b.y + b.height / 2
        bend = max(30.0, (x2 - x1) / 2)
        out.append(
            f'<g class="edge" data-source="{html.escape(arrow.source)}" '
            f'data-target="{html.escape(arrow.target)}">'
            f'<path d="M {x1:.1f} {y1:.1f} C {x1 + bend:.1f} {y1:.1f} {x2 - bend:.1f} {y2:.1f} '
            f'{x2:.1f} {y2:.1f}" marker-end="url(#arrow)"/>'
        )
        if arrow.label:
            out.append(
                f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 4:.1f}" '
                f'text-anchor="middle">{html.escape(arrow.label)}</text>'
            )
        out.append("</g>")
    for p in placed:
        out.append(
            f'<g class="node" data-id="{html.escape(p.box.id)}" tabindex="0">'
            f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{p.width:.1f}" height="{p.height:.1f}" '
            'rx="6"/>'
        )
        for i, line in enumerate((p.box.title, *p.box.lines)):
            cls = ' class="title"' if i == 0 else ""
            out.append(
                f'<text{cls} x="{p.x + _PADDING:.1f}" '
                f'y="{p.y + _PADDING + (i + 0.8) * _LINE_HEIGHT:.1f}">{html.escape(_shown(line))}'
                "</text>"
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _page(job: CompiledJob, stage: str, placed: list[Placed], arrows: list[Arrow]) -> str:
    data = {
        p.box.id: {
            "title": p.box.title,
            "details": [list(d) for d in p.box.details],
            "source": _excerpt(job.source, p.box.span),
            "file": job.file,
        }
        for p in placed
    }
    spark = "\n".join(job.spark_plan.to_text())
    title = f"{job.job_graph.name}: {stage}"
    return _TEMPLATE.format(
        title=html.escape(title),
        stage=html.escape(stage),
        count=len(placed),
        svg=_svg(placed, arrows),
        spark=html.escape(spark),
        data=_json_for_script(data),
        style=_STYLE,
        script=_SCRIPT,
    )


_STYLE = """
body { margin: 0; font: 13px/1.4 system-ui, sans-serif; color: #1d2630; display: grid;
  grid-template-columns: 1fr 420px; grid-template-rows: auto 1fr; height: 100vh; }
header { grid-column: 1 / 3; padding: 8px 14px; background: #23303d; color: #fff; }
header h1 { font-size: 15px; margin: 0; }
main { overflow: auto; background: #f6f8fa; }
aside { overflow: auto; border-left: 1px solid #ccd3da; padding: 10px 14px; }
svg text { font: 12px monospace; fill: #1d2630; }
svg text.title { font-weight: bold; }
g.node rect { fill: #fff; stroke: #3b6ea5; stroke-width: 1.5; }
g.node { cursor: pointer; }
g.node.selected rect { fill: #fff4c2; stroke: #b8860b; stroke-width: 2.5; }
g.edge path { fill: none; stroke: #6b7b8c; stroke-width: 1.4; }
g.edge text { fill: #44515e; font-size: 11px; }
pre { background: #f0f2f4; padding: 6px; white-space: pre-wrap; margin: 4px 0 10px; }
dt { font-weight: bold; margin-top: 6px; }
dd { margin: 0; white-space: pre-wrap; font-family: monospace; }
.line-number { color: #7a8793; user-select: none; }
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById('plan-data').textContent);
  const panel = document.getElementById('details');
  function show(id) {
    const node = data[id];
    document.querySelectorAll('g.node.selected').forEach(g => g.classList.remove('selected'));
    const g = document.querySelector('g.node[data-id="' + CSS.escape(id) + '"]');
    if (g) g.classList.add('selected');
    panel.replaceChildren();
    const h = document.createElement('h2');
    h.textContent = node.title;
    panel.appendChild(h);
    const source = document.createElement('pre');
    source.id = 'source';
    for (const [number, text] of node.source) {
      const n = document.createElement('span');
      n.className = 'line-number';
      n.textContent = node.file + ':' + number + '  ';
      source.appendChild(n);
      source.appendChild(document.createTextNode(text + '\\n'));
    }
    panel.appendChild(source);
    const list = document.createElement('dl');
    for (const [name, value] of node.details) {
      const dt = document.createElement('dt');
      dt.textContent = name;
      const dd = document.createElement('dd');
      dd.textContent = value;
      list.append(dt, dd);
    }
    panel.appendChild(list);
  }
  document.querySelectorAll('g.node').forEach(g => {
    g.addEventListener('click', () => show(g.dataset.id));
    g.addEventListener('keydown', e => { if (e.key === 'Enter') show(g.dataset.id); });
  });
})();
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-stage="{stage}" data-nodes="{count}">
<header><h1>{title}</h1></header>
<main id="graph">
{svg}
</main>
<aside>
<section id="details"><p>Click a box to see its source lines, schema, key groups and
Spark exchanges.</p></section>
<h2>Spark realization</h2>
<pre id="spark">{spark}</pre>
</aside>
<script type="application/json" id="plan-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
