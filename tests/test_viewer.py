"""The plan viewer's page without a browser (issue 15, item 2): every graph stage of every
example is one self-contained, deterministic page that draws every node, laid out left
to right with no box over another, and a hostile name is text, never markup. Each JOIN
shows its condition and time bound, each source its watermark, in the box and the
details (issue 30, item 5). The page in a real browser: tests/test_viewer_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import flowc
from flowc.cli.main import main
from flowc.viewer import _GRAPHS, GRAPH_STAGES, MAX_VIEW_NODES, Box, layout, render_html
from tests.helpers.viewer import declared_watermarks, joins, vertex_of

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))


def compiled(path: Path) -> flowc.CompiledJob:
    return flowc.compile(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))


def node_count(job: flowc.CompiledJob, stage: str) -> int:
    return {
        "transformations": len(job.transformations.transformations),
        "streamgraph": len(job.stream_graph.nodes),
        "jobgraph": len(job.job_graph.vertices),
    }[stage]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("stage", GRAPH_STAGES)
def test_every_node_is_drawn_on_a_page_that_needs_nothing_else(path: Path, stage: str) -> None:
    job = compiled(path)
    page = render_html(job, stage)
    assert page.count('<g class="node"') == node_count(job, stage)
    assert not re.search(r"<(link|img|iframe)\b|\s(src|href)=", page)  # nothing to fetch
    assert "url(" not in page.replace("url(#arrow)", "")
    assert page == render_html(compiled(path), stage)  # the same bytes, compiled again


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_left_to_right_with_no_box_over_another(path: Path) -> None:
    job = compiled(path)
    for stage in GRAPH_STAGES:
        boxes, arrows = _GRAPHS[stage](job)
        placed = {p.box.id: p for p in layout(boxes, arrows)}
        assert len(placed) == len(boxes)
        for arrow in arrows:
            a, b = placed[arrow.source], placed[arrow.target]
            assert a.x + a.width < b.x, (stage, arrow)
        shown = list(placed.values())
        for i, p in enumerate(shown):
            for q in shown[i + 1 :]:
                apart = (
                    p.x + p.width <= q.x
                    or q.x + q.width <= p.x
                    or p.y + p.height <= q.y
                    or q.y + q.height <= p.y
                )
                assert apart, (stage, p.box.id, q.box.id)


def test_a_hostile_name_is_text_not_markup() -> None:
    name = "`</script><script>alert(1)</script><b`"
    text = (
        f"CREATE SOURCE {name} (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM {name} |> WHERE k > 0;\n"
    )
    page = render_html(flowc.compile(text, "evil.flow"), "jobgraph")
    assert "<script>alert" not in page
    assert page.count("<script") == 2  # the page's data and its code, nothing more
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page  # drawn as text in the box
    assert "\\u003c/script\\u003e" in page  # and as data for the details panel


def test_the_source_excerpt_and_spark_exchange_are_in_the_details() -> None:
    job = compiled(ROOT / "examples" / "clicks_per_user.flow")
    page = render_html(job, "jobgraph")
    block = re.search(r'<script type="application/json" id="plan-data">(.*?)</script>', page)
    assert block is not None
    data = json.loads(block.group(1))
    window = next(v for v in job.job_graph.vertices.values() if "Window" in v.name)
    line = job.source.splitlines()[window.span.line - 1]
    assert [window.span.line, line] in data[window.id]["source"]
    details = dict(data[window.id]["details"])
    assert details["key groups"].startswith("subtasks 0-")
    assert details["parallelism"] == str(window.parallelism)
    into = [v for k, v in details.items() if k.startswith("in from")]
    assert into and all("\nSpark: " in v for v in into)
    assert "ts  TIMESTAMP" in details["schema"] or "window_start" in details["schema"]


def test_too_large_a_graph_is_refused_not_laid_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = "".join(
        f" |> SELECT k + {i} AS k WITH (parallelism = {1 + i % 2})" for i in range(MAX_VIEW_NODES)
    )
    job = tmp_path / "big.flow"
    job.write_text(
        "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM s{steps};\n",
        encoding="utf-8",
    )
    assert main(["compile", str(job), "--emit", "streamgraph", "--format", "html"]) == 2
    assert "the HTML viewer lays out at most" in capsys.readouterr().err


def box_text(box: Box) -> str:
    """A box's lines as one text: a note wrapped over lines reads whole again."""
    return " ".join(box.lines)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_join_shows_its_condition_and_time_bound_in_its_box_and_details(path: Path) -> None:
    job = compiled(path)
    shown = joins(job)
    for stage in GRAPH_STAGES:
        boxes = {b.id: b for b in _GRAPHS[stage](job)[0]}
        for join in shown:
            box = boxes[
                {"transformations": f"t{join.node}", "streamgraph": f"n{join.node}"}.get(
                    stage, vertex_of(job, join.node)
                )
            ]
            details = {k.split(" (")[0]: v for k, v in box.details}
            assert details["condition"] == join.condition
            assert f"ON {join.condition}" in box_text(box)
            if join.time_range is not None:  # an interval join: its bound is the range
                assert details["time bound"] == join.time_range
                assert f"time bound: {join.time_range}" in box_text(box)
            else:
                assert details["time bound"].startswith(("none", "FOR SYSTEM_TIME AS OF"))
            lines = [i for i, line in enumerate(box.lines) if join.condition[:20] in line]
            assert lines and all(i in box.notes for i in lines)  # drawn as notes
    if path.stem in ("orders_payments_join", "auctions", "nexmark_q4"):
        assert shown  # the examples this test is about have their joins found


def test_a_join_without_a_time_bound_says_so_and_a_comment_in_on_is_left_out() -> None:
    text = (
        "CREATE SOURCE a (k BIGINT, v STRING) WITH (connector = 'datagen');\n"
        "CREATE SOURCE b (k BIGINT, w STRING) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM a |> JOIN b ON a.k = b.k -- the key\n"
        "  AND (v = w OR w BETWEEN 'a' AND 'z') |> SELECT a.k, v, w;\n"
    )
    job = flowc.compile(text, "regular.flow")
    (box,) = [b for b in _GRAPHS["streamgraph"](job)[0] if b.title == "Join"]
    details = dict(box.details)
    assert details["condition"] == "a.k = b.k AND (v = w OR w BETWEEN 'a' AND 'z')"
    assert details["time bound"] == "none (every row of both sides stays in state)"
    assert box.lines[:2] == ("ON a.k = b.k", "AND (v = w OR w BETWEEN 'a' AND 'z')")
    assert "time bound: none (every row of both sides stays in state)" in box_text(box)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_source_shows_its_watermark_in_its_box_and_details(path: Path) -> None:
    job = compiled(path)
    declared = declared_watermarks(job.source)
    for stage in GRAPH_STAGES:
        boxes = {b.title: b for b in _GRAPHS[stage](job)[0]}
        for source in job.program.sources:
            name = f"Source: {source.name}"
            box = boxes.get(name) or next(b for b in boxes.values() if name in b.lines)
            watermark = dict((k.split(" (")[0], v) for k, v in box.details)["watermark"]
            if source.name in declared:
                assert watermark.startswith(declared[source.name])
                assert declared[source.name] in box_text(box)
            else:
                assert watermark.startswith("no watermark")
                assert watermark in box.lines
                assert source.watermark is None
    if path.stem in ("orders_payments_join", "clicks_per_user", "nexmark_q6"):
        assert declared  # the regex finds what these examples declare


def test_a_hostile_condition_is_text_not_markup() -> None:
    text = (
        "CREATE SOURCE a (k BIGINT, v STRING) WITH (connector = 'datagen');\n"
        "CREATE SOURCE b (k BIGINT, w STRING) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM a |> JOIN b ON a.k = b.k\n"
        "  AND w <> '</script><script>alert(1)</script>' |> SELECT a.k, v, w;\n"
    )
    page = render_html(flowc.compile(text, "evil.flow"), "jobgraph")
    assert "<script>alert" not in page
    assert page.count("<script") == 2
    assert "AND w &lt;&gt; &#x27;&lt;/script&gt;&lt;script&gt;alert(1)" in page  # the box
    assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)" in page  # the details' data


def test_a_join_as_of_a_time_shows_that_time_as_its_bound() -> None:
    """FOR SYSTEM_TIME AS OF an event time (a versioned table: Flink's temporal join) and
    of a processing time (sql_top_categories: Flink's lookup join)."""
    text = (
        "CREATE SOURCE orders (id BIGINT, cur STRING, ts TIMESTAMP,\n"
        "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS) WITH (connector = 'datagen');\n"
        "CREATE TABLE rates (cur STRING, rate DOUBLE, since TIMESTAMP)\n"
        "  WITH (connector = 'files', path = 'rates', format = 'json', key = 'cur',\n"
        "  version_time = 'since');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o SELECT o.id, r.rate FROM orders AS o\n"
        "  JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;\n"
    )
    lookup = compiled(ROOT / "examples" / "sql_top_categories.flow")
    for job, time in ((flowc.compile(text, "temporal.flow"), "ts"), (lookup, "arrived")):
        (join,) = joins(job)
        box = next(b for b in _GRAPHS["streamgraph"](job)[0] if b.id == f"n{join.node}")
        bound = dict(box.details)["time bound"]
        assert re.fullmatch(
            rf"FOR SYSTEM_TIME AS OF `\w+`\.{time} \((event|processing) time: .*\)", bound
        )
        assert ("event time" in bound) == (job is not lookup)
        assert f"time bound: {bound}" in box_text(box)
