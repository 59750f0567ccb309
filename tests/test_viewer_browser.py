"""The plan viewer in a real browser (issue 15, item 2): Debian's headless Chromium,
driven by selenium through chromedriver, loads each example's JobGraph page from a
file:// URL (offline: Chromium runs with its network features off) with no console
error, draws every vertex, and a click on a vertex shows its source line in the details.
A screenshot of each example is written (README's two to docs/images/ with
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
from flowc.viewer import render_html

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))
IMAGES = ROOT / "docs" / "images"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


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
        "--window-size=1600,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


#: The examples whose screenshots README.md shows.
SHOWN = ("clicks_per_user", "auctions")


def screenshots(tmp_path_factory: pytest.TempPathFactory, example: str) -> Path:
    if os.environ.get("FLOWC_UPDATE_SCREENSHOTS") == "1" and example in SHOWN:
        return IMAGES
    return tmp_path_factory.getbasetemp() / "screenshots"


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
    folder = screenshots(tmp_path_factory, path.stem)
    folder.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(folder / f"viewer-{path.stem}.png"))


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
