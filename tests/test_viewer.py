"""The plan viewer's page without a browser (issue 15, item 2): every graph stage of every
example is one self-contained, deterministic page that draws every node, laid out left
to right with no box over another, and a hostile name is text, never markup. The page in
a real browser: tests/test_viewer_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import flowc
from flowc.cli.main import main
from flowc.viewer import _GRAPHS, GRAPH_STAGES, MAX_VIEW_NODES, layout, render_html

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
