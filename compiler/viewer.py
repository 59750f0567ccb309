"""The plan viewer: one self-contained HTML page for a graph stage (``--format html``).

The graph is laid out in Python with grandalf's Sugiyama layout (layers turned to run
left to right), drawn as inline SVG: a box per node (a JobGraph vertex lists its chained
operators), each edge labelled with its ship strategy and keys, each JOIN with its ON
condition and time bound, each source with its watermark. Clicking a box shows what the
plans know of it: its source lines, the schema it outputs, parallelism, slot sharing
group, key groups, and the Spark exchange of each edge into it; the physical plan's Spark
realization is beside the graph, and the page's script fits the drawing to its pane.
Everything is in the one file (no network, no CDN), the same input gives the same bytes,
and every text from the program reaches the page escaped (HTML in Python,
``textContent`` in the script), so a name is never markup.
"""

from __future__ import annotations

import html
import json
import textwrap
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType

from flowc.fast_dataclass import dataclass
from flowc.graph.changelog import is_interval_join
from flowc.program import DimensionJoinStep, JoinStep, Schema, SourceDef, Stream
from flowc.sql.spark_sql import UnsupportedOnSpark, watermark_delay
from flowc.sql.sql_parsing import sql_tools

if TYPE_CHECKING:
    from flowc import ast
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
    #: The indexes in ``lines`` of notes (a JOIN's condition and bound, a watermark),
    #: drawn in their own colour.
    notes: frozenset[int] = frozenset()


def _box(
    id: str,
    title: str,
    parts: list[tuple[str, _Notes]],
    last: str,
    details: list[tuple[str, str]],
    span: Span,
) -> Box:
    """A box of ``title`` whose lines are each part's name (none where empty) and notes,
    then ``last``."""
    lines: list[str] = []
    notes: set[int] = set()
    for name, noted in parts:
        if name:
            lines.append(name)
        notes.update(range(len(lines), len(lines) + len(noted.lines)))
        lines += noted.lines
    return Box(id, title, (*lines, last), tuple(details), span, frozenset(notes))


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


@dataclass(frozen=True, slots=True)
class _Notes:
    """What the plans know of a node beyond its name: a JOIN's condition and time bound, a
    source's watermark; ``lines`` go in its box, ``details`` to the click-through."""

    lines: tuple[str, ...]
    details: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Facts:
    """Per StreamGraph node id (a transformation's id too): its schema and notes."""

    schemas: dict[int, Schema]
    notes: dict[int, _Notes]


def _facts(job: CompiledJob) -> _Facts:
    """The schema each StreamGraph node (and transformation) outputs, and the notes of its
    JOIN or source."""
    program = job.program
    tree = job.transformations
    found: dict[int, Schema] = {}
    notes: dict[int, _Notes] = {}
    times = frozenset(s.watermark.column for s in program.sources if s.watermark is not None)
    for source in program.sources:
        node = tree.source_nodes.get(source.name)
        if node is not None:
            found[node] = source.output_schema
            notes[node] = _watermark_notes(source)
    for insert, sink in zip(program.inserts, job.stream_graph.sinks, strict=True):
        found[sink] = insert.stream.schema  # a sink writes what its query outputs
    streams: list[Stream] = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    while streams:
        stream = streams.pop()
        for step in stream.steps:
            node = tree.step_nodes.get(id(step))
            if node is not None:
                found.setdefault(node, step.schema)
                if isinstance(step, JoinStep | DimensionJoinStep) and node not in notes:
                    notes[node] = _join_notes(step, times)
            streams.extend(step.inputs)
    return _Facts(found, notes)


_NO_NOTES = _Notes((), ())

#: Lines of a box a JOIN's condition (and its time bound) may take; the details have all.
_CONDITION_LINES = 4
_BOUND_LINES = 2


def _watermark_notes(source: SourceDef) -> _Notes:
    """``WATERMARK FOR col AS expr`` as declared (and Spark's ``withWatermark``), or why
    there is none."""
    mark = source.watermark
    if mark is None:
        if source.bounded:
            text = "no watermark (a table, read whole)"
        elif source.proctime is not None:
            text = f"no watermark (processing time {source.proctime})"
        else:
            text = "no watermark"
        return _Notes((text,), (("watermark", text),))
    text = f"WATERMARK FOR {mark.column} AS {_one_line(mark.expr.text)}"
    try:
        column, delay = watermark_delay(source)
        spark = f"\nSpark: withWatermark('{column}', '{delay}')"
    except UnsupportedOnSpark:
        spark = ""
    return _Notes(_wrapped(text, _BOUND_LINES), (("watermark", text + spark),))


def _join_notes(step: JoinStep | DimensionJoinStep, times: frozenset[str]) -> _Notes:
    """The ON condition as the plans print expressions (one line, comments out), a line
    per conjunct in the box, and the time bound: an interval join's range conditions, a
    temporal or lookup join's FOR SYSTEM_TIME AS OF, or that none bounds it
    (docs/viewer.md)."""
    node = step.node
    condition = node.condition
    if isinstance(step, DimensionJoinStep):
        if node.as_of is None:
            bound = "none (each row meets the table as read: a stream-static join)"
        else:
            what = (
                "event time: the version valid then"
                if step.temporal
                else "processing time: the table as read"
            )
            bound = f"FOR SYSTEM_TIME AS OF {_one_line(node.as_of.text)} ({what})"
    elif condition is not None and is_interval_join(step, times):
        bound = " AND ".join(_time_conjuncts(condition, times))
    else:
        bound = "none (every row of both sides stays in state)"
    if condition is None:  # E0219 refuses it; drawn all the same
        texts = ["none"]
        on_text = "none"
    else:
        texts = _conjunct_texts(condition.text) or [_one_line(condition.text)]
        on_text = _one_line(condition.text)
    # A line per conjunct (wrapped where long), the last of the box cut with "…".
    on = [
        line
        for i, text in enumerate(texts)
        for line in _wrapped(("AND " if i else "ON ") + text, _CONDITION_LINES)
    ]
    if len(on) > _CONDITION_LINES:
        on = [*on[: _CONDITION_LINES - 1], *_wrapped(" ".join(on[_CONDITION_LINES - 1 :]), 1)]
    lines = (*on, *_wrapped(f"time bound: {bound}", _BOUND_LINES))
    return _Notes(lines, (("condition", on_text), ("time bound", bound)))


def _time_conjuncts(condition: ast.SqlExpr, times: frozenset[str]) -> list[str]:
    """The conjuncts of ON that bound an event time by a range, as written; the whole
    condition where the range is inside another condition (an OR, a NOT)."""
    tree = condition.tree
    parts = [p.unnest() for p in tree.flatten()] if isinstance(tree, exp.And) else [tree]
    texts = _conjunct_texts(condition.text)
    if texts is None or len(texts) != len(parts):
        texts = [p.sql() for p in parts]
    chosen = [
        text
        for part, text in zip(parts, texts, strict=True)
        if any(
            isinstance(n, exp.Between | exp.LT | exp.LTE | exp.GT | exp.GTE)
            and any(c.name in times for c in n.find_all(exp.Column))
            for n in part.walk()
        )
    ]
    return chosen or [_one_line(condition.text)]


def _tokens(text: str) -> list[tuple[TokenType, int, int]] | None:
    """Each token of ``text``: its type, start and end; None where the text does not
    tokenize."""
    try:
        tokens = sql_tools("spark")[0].tokenize(text)
    except TokenError:
        return None
    return [(t.token_type, t.start, t.end + 1) for t in tokens]


def _conjunct_texts(text: str) -> list[str] | None:
    """``text`` split at its top-level ANDs (not a BETWEEN's, nor one in parentheses or a
    CASE), each part on one line; None where the text does not tokenize."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    parts: list[list[tuple[int, int]]] = [[]]
    depth = betweens = 0
    for kind, start, end in tokens:
        if kind in (TokenType.L_PAREN, TokenType.CASE):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.END):
            depth -= 1
        elif kind == TokenType.BETWEEN and depth == 0:
            betweens += 1
        elif kind == TokenType.AND and depth == 0:
            if betweens:
                betweens -= 1
            else:
                parts.append([])
                continue
        parts[-1].append((start, end))
    return [_joined(text, spans) for spans in parts]


def _joined(text: str, spans: list[tuple[int, int]]) -> str:
    """The tokens at ``spans`` of ``text``, one space where anything (a line break, a
    comment) stood between two."""
    out: list[str] = []
    for i, (start, end) in enumerate(spans):
        if i and start > spans[i - 1][1]:
            out.append(" ")
        out.append(text[start:end])
    return "".join(out)


def _one_line(text: str) -> str:
    """An expression as the plans print it: its tokens on one line, comments out."""
    tokens = _tokens(text)
    if tokens is None:
        return " ".join(text.split())
    return _joined(text, [(start, end) for _, start, end in tokens])


def _wrapped(text: str, lines: int) -> tuple[str, ...]:
    """``text`` in at most ``lines`` lines of a box, broken at spaces, the last cut with
    ``…`` where it does not fit."""
    return tuple(
        textwrap.wrap(text, _BOX_CHARS, max_lines=lines, placeholder=" …", break_on_hyphens=False)
    )


def _schema_text(schema: Schema | None) -> str:
    if schema is None:
        return "(not known here)"
    return "\n".join(f"{c.name}  {c.type}" for c in schema)


def _transformation_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    tree = job.transformations
    facts = _facts(job)
    boxes, arrows = [], []
    for t in tree.transformations.values():
        notes = facts.notes.get(t.id, _NO_NOTES)
        details = [
            ("transformation", f"{t.id} ({t.kind.value})"),
            ("parallelism", str(t.parallelism)),
            ("max parallelism", str(t.max_parallelism or "unset")),
            ("slot sharing group", t.slot_sharing_group or "default"),
            ("uid", t.uid or "none"),
        ]
        if t.partitioner is not None:
            details.append(("partitioner", _with_keys(str(t.partitioner), t.keys)))
        details += [*notes.details, ("schema", _schema_text(facts.schemas.get(t.id)))]
        group = f", slot group '{t.slot_sharing_group}'" if t.slot_sharing_group else ""
        boxes.append(
            _box(f"t{t.id}", t.name, [("", notes)], f"p={t.parallelism}{group}", details, t.span)
        )
        arrows += [Arrow(f"t{i}", f"t{t.id}", "") for i in t.inputs]
    return boxes, arrows


def _stream_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    graph = job.stream_graph
    spark = job.spark_plan
    facts = _facts(job)
    boxes, arrows = [], []
    for node in graph.nodes.values():
        notes = facts.notes.get(node.id, _NO_NOTES)
        details = [
            ("stream node", f"{node.id} ({node.operator})"),
            ("parallelism", str(node.parallelism)),
            ("max parallelism", str(node.max_parallelism or "unset")),
            ("slot sharing group", node.slot_sharing_group),
            ("keys", ", ".join(node.keys) or "none"),
            *notes.details,
            ("schema", _schema_text(facts.schemas.get(node.id))),
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
            _box(
                f"n{node.id}",
                node.name,
                [("", notes)],
                f"p={node.parallelism}, slot group '{node.slot_sharing_group}'",
                details,
                node.span,
            )
        )
    return boxes, arrows


def _job_graph(job: CompiledJob) -> tuple[list[Box], list[Arrow]]:
    graph = job.job_graph
    spark = job.spark_plan
    facts = _facts(job)
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
        ]
        for op in vertex.operators:
            notes = facts.notes.get(op.node_id, _NO_NOTES)
            chained = len(vertex.operators) > 1
            details += [(f"{k} ({op.name})" if chained else k, v) for k, v in notes.details]
        details.append(("schema", _schema_text(facts.schemas.get(last))))
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
        boxes.append(
            _box(
                vertex.id,
                vertex.name,
                [(op.name, facts.notes.get(op.node_id, _NO_NOTES)) for op in vertex.operators],
                f"p={vertex.parallelism}, slot group '{vertex.slot_sharing_group}'",
                details,
                vertex.span,
            )
        )
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
_BOX_CHARS = 60


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
    # The boxes start at 20: a margin of 20 on every side, so a centred SVG centres them.
    width = max((p.x + p.width for p in placed), default=0) + 20
    height = max((p.y + p.height for p in placed), default=0) + 20
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
            cls = ' class="title"' if i == 0 else ' class="note"' if i - 1 in p.box.notes else ""
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
header { grid-column: 1 / 3; padding: 8px 14px; background: #23303d; color: #fff;
  display: flex; align-items: center; justify-content: space-between; }
header h1 { font-size: 15px; margin: 0; }
header button { font: inherit; min-width: 32px; margin-left: 4px; cursor: pointer; }
main.dragging { cursor: grabbing; user-select: none; }
main { overflow: auto; background: #f6f8fa; display: flex; min-width: 0; min-height: 0; }
main > svg { margin: auto; flex: none; }
aside { overflow: auto; border-left: 1px solid #ccd3da; padding: 10px 14px; }
svg text { font: 12px monospace; fill: #1d2630; }
svg text.title { font-weight: bold; }
svg text.note { fill: #8a4b00; }
g.node rect { fill: #fff; stroke: #3b6ea5; stroke-width: 1.5; }
g.node { cursor: pointer; }
g.node.selected rect { fill: #fff4c2; stroke: #b8860b; stroke-width: 2.5; }
g.edge path { fill: none; stroke: #6b7b8c; stroke-width: 1.4; }
g.edge text { fill: #44515e; font-size: 11px; }
pre { background: #f0f2f4; padding: 6px; white-space: pre-wrap; overflow-wrap: anywhere;
  margin: 4px 0 10px; }
dt { font-weight: bold; margin-top: 6px; }
dd { margin: 0; white-space: pre-wrap; font-family: monospace; }
.line-number { color: #7a8793; user-select: none; }
"""

_SCRIPT = """
(function () {
  // Fit the drawing to its pane: the scale at which it fills the pane's width or height
  // (whichever binds), at most FIT_MAX (a small job is not drawn huge) and at least
  // FIT_MIN (past that the pane scrolls); centred by CSS. Ctrl+wheel, the buttons and
  // the keys + - 0 zoom; a drag of the background pans. A resize fits again until the
  // reader has zoomed, then keeps their zoom.
  const FIT_MAX = %(fit_max)s, FIT_MIN = %(fit_min)s, ZOOM_MIN = 0.1, ZOOM_MAX = 4;
  const pane = document.getElementById('graph');
  const svg = pane.querySelector('svg');
  const box = svg.viewBox.baseVal;
  let scale = 1, zoomed = false;
  function setScale(next) {
    scale = next;
    svg.setAttribute('width', String(Math.round(box.width * scale)));
    svg.setAttribute('height', String(Math.round(box.height * scale)));
    document.body.dataset.zoom = scale.toFixed(3);
  }
  function fit() {
    setScale(0);  // measure the pane without the drawing's scroll bars
    setScale(Math.max(FIT_MIN, Math.min(
      pane.clientWidth / box.width, pane.clientHeight / box.height, FIT_MAX)));
    zoomed = false;
  }
  function zoomAt(next, x, y) {  // keep the drawing's point under (x, y) in place
    next = Math.max(ZOOM_MIN, Math.min(ZOOM_MAX, next));
    const before = svg.getBoundingClientRect();
    const ux = (x - before.left) / scale, uy = (y - before.top) / scale;
    setScale(next);
    const after = svg.getBoundingClientRect();
    pane.scrollLeft += after.left + ux * scale - x;
    pane.scrollTop += after.top + uy * scale - y;
    zoomed = true;
  }
  function zoomCentre(factor) {
    const r = pane.getBoundingClientRect();
    zoomAt(scale * factor, r.left + r.width / 2, r.top + r.height / 2);
  }
  fit();
  window.addEventListener('resize', () => { if (!zoomed) fit(); });
  document.getElementById('zoom-in').addEventListener('click', () => zoomCentre(1.25));
  document.getElementById('zoom-out').addEventListener('click', () => zoomCentre(0.8));
  document.getElementById('zoom-fit').addEventListener('click', fit);
  document.addEventListener('keydown', e => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === '+' || e.key === '=') zoomCentre(1.25);
    else if (e.key === '-') zoomCentre(0.8);
    else if (e.key === '0') fit();
  });
  pane.addEventListener('wheel', e => {
    if (!e.ctrlKey && !e.metaKey) return;  // a plain wheel scrolls
    e.preventDefault();
    zoomAt(scale * Math.exp(-e.deltaY / 300), e.clientX, e.clientY);
  }, { passive: false });
  let drag = null;
  pane.addEventListener('pointerdown', e => {
    if (e.button !== 0 || e.target.closest('g.node')) return;
    drag = { x: e.clientX, y: e.clientY, left: pane.scrollLeft, top: pane.scrollTop };
    pane.classList.add('dragging');
  });
  window.addEventListener('pointermove', e => {
    if (!drag) return;
    pane.scrollLeft = drag.left - (e.clientX - drag.x);
    pane.scrollTop = drag.top - (e.clientY - drag.y);
  });
  window.addEventListener('pointerup', () => { drag = null; pane.classList.remove('dragging'); });
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

#: The drawing's scale fitted to its pane, at most (a 2-node job is not drawn huge) and at
#: least (past that its pane scrolls); the reader zooms from there (docs/viewer.md).
FIT_MAX = 1.6
FIT_MIN = 0.3
_SCRIPT = _SCRIPT % {"fit_max": FIT_MAX, "fit_min": FIT_MIN}

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-stage="{stage}" data-nodes="{count}">
<header><h1>{title}</h1><nav aria-label="zoom"><button id="zoom-out" type="button"
title="zoom out (-)">&#8722;</button><button id="zoom-fit" type="button"
title="fit to the pane (0)">fit</button><button id="zoom-in" type="button"
title="zoom in (+)">+</button></nav></header>
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
