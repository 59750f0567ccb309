"""The registry of diagnostic codes against the docs and the code that reports them.

Every code is defined once (compiler/errorcodes.py); docs/language.md's table must be that
registry written out, every code the docs mention must exist, every section a code points
to must exist, and every registered code must be reported somewhere (no dead codes), as
must no code outside the registry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowc.errorcodes import Code, markdown_table

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CODE_TEXT = re.compile(r"\b[EW]\d{4}\b")
RANGE = re.compile(r"\b([EW])(\d{4})[–-]\1?(\d{4})\b")


def _sources() -> dict[Path, str]:
    files = sorted((ROOT / "compiler").rglob("*.py")) + sorted((ROOT / "runtime").rglob("*.py"))
    return {p: p.read_text(encoding="utf-8") for p in files if p.name != "errorcodes.py"}


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_docs_table_is_the_registry() -> None:
    text = (DOCS / "language.md").read_text(encoding="utf-8")
    assert markdown_table() in text, (
        "docs/language.md's code table differs from compiler/errorcodes.py: "
        "run `python -m flowc.errorcodes --update-docs`"
    )


def test_every_code_the_docs_mention_exists() -> None:
    known = {c.value for c in Code}
    stale: list[str] = []
    for path in [*sorted(DOCS.glob("*.md")), ROOT / "README.md", ROOT / "RELIABILITY.md"]:
        text = path.read_text(encoding="utf-8")
        for match in RANGE.finditer(text):
            letter, low, high = match.groups()
            ends = {f"{letter}{low}", f"{letter}{high}"}
            stale += [f"{path.name}: {match.group(0)} ({end})" for end in ends - known]
        stale += [f"{path.name}: {m}" for m in CODE_TEXT.findall(text) if m not in known]
    assert not stale, stale


@pytest.mark.parametrize("code", list(Code), ids=lambda c: c.value)
def test_each_code_points_at_a_section_that_exists(code: Code) -> None:
    page, _, anchor = code.anchor.partition("#")
    text = (DOCS / page).read_text(encoding="utf-8")
    if anchor:
        headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
        assert anchor in headings, f"{code.value}: docs/{page} has no section #{anchor}"
    assert code.value in text or page == "language.md", f"docs/{page} never names {code.value}"


def test_every_code_is_registered_and_every_registered_code_is_reported() -> None:
    used: set[str] = set()
    for text in _sources().values():
        used |= set(re.findall(r"\bCode\.([EW]\d{4})\b", text))
        used |= set(re.findall(r"\"([EW]\d{4})\"", text))
    known = {c.value for c in Code}
    assert used - known == set(), "reported but not registered"
    assert known - used == set(), "registered but never reported"


def test_codes_are_unique_and_well_formed() -> None:
    slugs = [c.slug for c in Code]
    assert len(set(slugs)) == len(slugs)
    for code in Code:
        assert re.fullmatch(r"[EW]\d{4}", code.value)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code.slug), code.slug
        assert code.summary and not code.summary.endswith(".")
