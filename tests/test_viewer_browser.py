"""The plan viewer in a real browser (issue 15, item 2): Debian's headless Chromium,
driven by selenium through chromedriver, loads each example's JobGraph page from a
file:// URL (offline: Chromium runs with its network features off) with no console
error, draws every vertex, and a click on a vertex shows its source line in the details.
Issue 30, item 5: the drawing is fitted to its pane (and again on a resize), each JOIN's
condition and time bound and each source's watermark are in the rendered page, read
from the DOM. A screenshot of each example is written (README's to docs/images/ with
FLOWC_UPDATE_SCREENSHOTS=1). Skipped with the reason where Chromium
or chromedriver is missing, except in CI (FLOWC_BROWSER_REQUIRED=1, set by .ci/run).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.viewer import FIT_MAX, render_html
from tests.helpers.viewer import declared_watermarks, joins, vertex_of

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))
IMAGES = ROOT / "docs" / "images"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: The browser's window: the tests' and most screenshots'.
WINDOW = (1600, 900)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        reason = f"no {', '.join(missing)}: apt-get install chromium chromium-driver"
        if os.environ.get("FLOWC_BROWSER_REQUIRED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


#: The examples whose screenshots README.md shows, each with the window it is taken in:
#: a wider one for a job whose fitted drawing would be too small to read.
SHOWN = {
    "clicks_per_user": WINDOW,
    "auctions": (2400, 1000),
    "orders_payments_join": WINDOW,
    "wordcount": WINDOW,
}


def screenshot(browser: Any, tmp_path_factory: pytest.TempPathFactory, example: str) -> None:
    """The page as shown now, into docs/images/ for README's examples when
    FLOWC_UPDATE_SCREENSHOTS=1 (in their window; the page fits itself to it), else into
    the test's temporary folder."""
    folder = tmp_path_factory.getbasetemp() / "screenshots"
    window = WINDOW
    if os.environ.get("FLOWC_UPDATE_SCREENSHOTS") == "1" and example in SHOWN:
        folder, window = IMAGES, SHOWN[example]
    folder.mkdir(parents=True, exist_ok=True)
    resize(browser, window)
    try:
        assert browser.save_screenshot(str(folder / f"viewer-{example}.png"))
    finally:
        resize(browser, WINDOW)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_page_loads_draws_every_vertex_and_shows_a_vertexs_source(
    browser: Any, path: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from selenium.webdriver.common.by import By

    text = path.read_text(encoding="utf-8")
    job = flowc.compile(text, str(path.relative_to(ROOT)))
    page = tmp_path / f"{path.stem}.jobgraph.html"
    page.write_text(render_html(job, "jobgraph"), encoding="utf-8")
    browser.get_log("browser")  # what earlier pages logged
    browser.get(page.as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "g.node")
    assert sorted(n.get_attribute("data-id") for n in nodes) == sorted(job.job_graph.vertices)
    for node in nodes:  # every box is drawn: it has a size on the screen
        assert node.rect["width"] > 20 and node.rect["height"] > 20
    vertex = max(job.job_graph.vertices.values(), key=lambda v: len(v.operators))
    browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{vertex.id}"]').click()
    source = browser.find_element(By.ID, "source").text
    assert text.splitlines()[vertex.span.line - 1].strip() in source
    assert f"{job.file}:{vertex.span.line}" in source
    details = browser.find_element(By.ID, "details").text
    assert "key groups" in details and "slot sharing group" in details
    assert browser.find_element(By.ID, "spark").text.startswith("Spark realization")
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    screenshot(browser, tmp_path_factory, path.stem)


def test_a_hostile_name_runs_no_script(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    name = "`<img src=x onerror=document.title='owned'>`"
    text = (
        f"CREATE SOURCE {name} (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM {name} |> WHERE k > 0;\n"
    )
    job = flowc.compile(text, "evil.flow")
    page = tmp_path / "evil.html"
    page.write_text(render_html(job, "jobgraph"), encoding="utf-8")
    browser.get(page.as_uri())
    for node in browser.find_elements(By.CSS_SELECTOR, "g.node"):
        node.click()
    assert browser.title != "owned"
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert "<img src=x" in browser.find_element(By.ID, "graph").text


def load(browser: Any, tmp_path: Path, job: flowc.CompiledJob) -> None:
    page = tmp_path / f"{job.job_graph.name}.jobgraph.html"
    page.write_text(render_html(job, "jobgraph"), encoding="utf-8")
    browser.get(page.as_uri())


def compiled(example: str) -> flowc.CompiledJob:
    path = ROOT / "examples" / f"{example}.flow"
    return flowc.compile(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))


#: The pane's inner box and the bounding box of what is drawn in it (boxes and edges), in
#: the page's pixels, and the drawing's scale (a box's size on screen over its size in the
#: SVG's own units).
_MEASURE = """
const pane = document.getElementById('graph');
const p = pane.getBoundingClientRect();
let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
for (const g of document.querySelectorAll('g.node, g.edge')) {
  const r = g.getBoundingClientRect();
  left = Math.min(left, r.left); top = Math.min(top, r.top);
  right = Math.max(right, r.right); bottom = Math.max(bottom, r.bottom);
}
const rect = document.querySelector('g.node rect');
return {
  pane: [p.left + pane.clientLeft, p.top + pane.clientTop, pane.clientWidth, pane.clientHeight],
  drawing: [left, top, right - left, bottom - top],
  scale: rect.getBoundingClientRect().width / rect.width.baseVal.value,
  scrolls: pane.scrollWidth > pane.clientWidth || pane.scrollHeight > pane.clientHeight,
};
"""


def assert_fitted(measured: dict[str, Any], capped: bool = False) -> None:
    """The drawing fills >= 80% of the pane's width or height (or, where ``capped`` may
    be, is drawn FIT_MAX times its size), lies inside the pane, is centred in it, and is
    drawn at most FIT_MAX times its size."""
    px, py, pw, ph = measured["pane"]
    dx, dy, dw, dh = measured["drawing"]
    full = max(dw / pw, dh / ph) >= 0.8
    assert full or (capped and measured["scale"] == pytest.approx(FIT_MAX)), measured
    assert px - 1 <= dx and dx + dw <= px + pw + 1, measured
    assert py - 1 <= dy and dy + dh <= py + ph + 1, measured
    assert not measured["scrolls"], measured
    assert abs((dx - px) - (px + pw - dx - dw)) <= 0.05 * pw, measured  # centred across
    assert abs((dy - py) - (py + ph - dy - dh)) <= 0.05 * ph, measured  # and down
    assert measured["scale"] <= FIT_MAX + 0.01, measured


def resize(browser: Any, size: tuple[int, int]) -> None:
    """The window at ``size``, once the page has handled the resize: a page handles its
    resize events before the animation frames that follow them."""
    browser.set_window_size(*size)
    browser.execute_async_script(
        "const done = arguments[0];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done()));"
    )


@pytest.mark.parametrize("example", ["wordcount", "orders_payments_join"])
def test_a_small_job_is_fitted_to_its_pane_and_again_after_a_resize(
    browser: Any, tmp_path: Path, example: str
) -> None:
    load(browser, tmp_path, compiled(example))
    assert_fitted(browser.execute_script(_MEASURE))
    try:
        for size in ((1100, 800), (1900, 600), (800, 1000)):
            resize(browser, size)
            assert_fitted(browser.execute_script(_MEASURE), capped=True)
    finally:
        resize(browser, WINDOW)


def test_a_readers_zoom_is_kept_across_a_resize_and_fit_restores_the_fitted_view(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    load(browser, tmp_path, compiled("orders_payments_join"))
    fitted = browser.execute_script(_MEASURE)["scale"]
    browser.find_element(By.ID, "zoom-in").click()
    browser.find_element(By.ID, "zoom-in").click()
    zoomed = browser.execute_script(_MEASURE)
    assert zoomed["scale"] == pytest.approx(fitted * 1.25 * 1.25, rel=0.02)
    assert zoomed["scrolls"]  # larger than its pane now: the pane scrolls
    try:
        resize(browser, (1200, 800))
        assert browser.execute_script(_MEASURE)["scale"] == pytest.approx(zoomed["scale"])
    finally:
        resize(browser, WINDOW)
    browser.find_element(By.ID, "zoom-fit").click()
    assert_fitted(browser.execute_script(_MEASURE))


def node_lines(browser: Any, vertex: str) -> list[str]:
    """The lines drawn in a vertex's box, as the DOM has them."""
    lines: list[str] = browser.execute_script(
        "return Array.from(document.querySelectorAll("
        "'g.node[data-id=\"' + CSS.escape(arguments[0]) + '\"] text'), t => t.textContent);",
        vertex,
    )
    return lines


@pytest.mark.parametrize("example", ["orders_payments_join", "nexmark_q4", "auctions"])
def test_each_joins_condition_and_time_bound_are_in_the_rendered_page(
    browser: Any, tmp_path: Path, example: str
) -> None:
    from selenium.webdriver.common.by import By

    job = compiled(example)
    load(browser, tmp_path, job)
    shown = joins(job)
    assert shown
    for join in shown:
        vertex = vertex_of(job, join.node)
        drawn = " ".join(node_lines(browser, vertex))  # a note wrapped over lines, whole
        assert f"ON {join.condition}" in drawn
        bound = join.time_range or "none"  # an interval join's range, or no bound
        assert f"time bound: {bound}" in drawn
        browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{vertex}"]').click()
        details = browser.find_element(By.ID, "details").text
        assert join.condition in details
        assert (join.time_range or "none (") in details
    if example == "orders_payments_join":
        assert all(j.time_range and " BETWEEN " in j.time_range for j in shown)
    if example == "auctions":
        assert all(j.time_range is None for j in shown)  # regular joins


@pytest.mark.parametrize("example", ["orders_payments_join", "wordcount", "auctions"])
def test_each_sources_watermark_is_in_the_rendered_page(
    browser: Any, tmp_path: Path, example: str
) -> None:
    from selenium.webdriver.common.by import By

    job = compiled(example)
    load(browser, tmp_path, job)
    declared = declared_watermarks(job.source)
    for source in job.program.sources:
        vertex = next(
            v.id
            for v in job.job_graph.vertices.values()
            if v.operators[0].name == f"Source: {source.name}"
        )
        expected = declared.get(source.name, "no watermark")
        assert any(line.startswith(expected) for line in node_lines(browser, vertex))
        browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{vertex}"]').click()
        assert expected in browser.find_element(By.ID, "details").text
    if example == "orders_payments_join":
        assert set(declared) == {s.name for s in job.program.sources}


def test_a_hostile_condition_runs_no_script_and_shows_as_text(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    evil = "</script><img src=x onerror=document.title=''owned''>"
    text = (
        "CREATE SOURCE a (k BIGINT, v STRING) WITH (connector = 'datagen');\n"
        "CREATE SOURCE b (k BIGINT, w STRING) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM a |> JOIN b ON a.k = b.k AND w <> '{evil}' |> SELECT a.k, v;\n"
    )
    job = flowc.compile(text, "evil.flow")
    load(browser, tmp_path, job)
    (join,) = joins(job)
    vertex = vertex_of(job, join.node)
    browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{vertex}"]').click()
    assert browser.title != "owned"
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert f"AND w <> '{evil}'" in " ".join(node_lines(browser, vertex))
    assert f"w <> '{evil}'" in browser.find_element(By.ID, "details").text
