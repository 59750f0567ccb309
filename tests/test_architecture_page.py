"""docs/architecture.md is the map of the code: every module is on it, nothing on it is
gone, and what it says of the graphs (built in their pass, never changed after) holds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import flowc
import flowc.driver
from flowc.diagnostics import Reporter

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
#: The folders the page maps to packages (pyproject's package-dir).
FOLDERS = ("compiler", "runtime", "grammar")
#: Every name the page writes in backticks.
NAMED = set(re.findall(r"`([^`\n]+)`", PAGE))


def _modules() -> Iterator[Path]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "__init__.py":
                yield path.relative_to(ROOT)


def _is_named(path: Path) -> bool:
    """A top-level module by its file name (`cli.py`, `runtime/run.py`), a module of a
    subpackage by the package (`state/`) and its name (`manifest` or `manifest.py`)."""
    parts = path.parts[1:]
    if len(parts) == 1:
        return path.name in NAMED or f"{path.parts[0]}/{path.name}" in NAMED
    package = "/".join(parts[:-1]) + "/"
    return (package in NAMED or f"{path.parts[0]}/{package}" in NAMED) and (
        path.stem in NAMED or path.name in NAMED
    )


def test_every_module_is_on_the_page() -> None:
    missing = [str(path) for path in _modules() if not _is_named(path)]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_module_the_page_names_exists() -> None:
    files = {path.name for path in _modules()} | {
        f"{path.parts[0]}/{path.name}" for path in _modules()
    }
    packages = {path.parts[1] for path in _modules() if len(path.parts) > 2}
    named = {
        name
        for name in NAMED
        if re.fullmatch(r"[\w/]+\.py", name)
        and ("/" not in name or name.split("/")[0] in {*FOLDERS, *packages})
    }
    gone = sorted(name for name in named if name.split("/")[-1] not in files and name not in files)
    assert not gone, f"docs/architecture.md names modules that are gone: {gone}"


def test_the_page_says_which_folder_is_which_package() -> None:
    head = " ".join(PAGE[: PAGE.index("## The pipeline")].split())
    for folder, package in (
        ("compiler/", "flowc"),
        ("runtime/", "flowc.runtime"),
        ("grammar/", "flowc.grammar"),
    ):
        assert f"`{folder}` is the package `{package}`" in head or (
            f"`{folder}` is `{package}`" in head
        ), folder


GRAPH_STAGES = ("transformations", "stream_graph", "job_graph", "physical_plan")


class _Recording:
    """A pass that, after it ran, records the JSON of every graph stage made so far."""

    def __init__(self, inner: Any, seen: dict[str, list[str]]) -> None:
        self.inner = inner
        self.seen = seen

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def apply(self, job: Any, reporter: Reporter) -> None:
        self.inner.apply(job, reporter)
        for stage in GRAPH_STAGES:
            value = getattr(job, stage, None)
            if value is not None:
                self.seen.setdefault(stage, []).append(value.to_json())


@pytest.mark.parametrize(
    "example", sorted(p.name for p in (ROOT / "examples").glob("*.flow")), ids=str
)
def test_no_pass_changes_a_graph_made_before_it(
    example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graphs are slotted, not frozen (built by mutation, as Flink's generators build
    theirs): what the page promises is that no later pass changes one."""
    seen: dict[str, list[str]] = {}
    passes = tuple(_Recording(p, seen) for p in flowc.driver.PASSES)
    monkeypatch.setattr(flowc.driver, "PASSES", passes)
    path = ROOT / "examples" / example
    flowc.compile(path.read_text(encoding="utf-8"), str(path), for_spark=True)
    assert set(seen) == set(GRAPH_STAGES)
    for stage, versions in seen.items():
        assert len(set(versions)) == 1, f"a pass after {stage} changed it"
