"""Data-driven checker tests, in the style of mypy's test-data files.

Each ``tests/data/check/*.test`` file holds several cases. A case starts with a line
``[case name]``; the lines after it, up to the next header, are a .flow program. Every
diagnostic the compiler reports is written as a trailing comment on the line where it is
reported::

    INSERT INTO o FROM s |> WHERE price > 10;  -- E: E0201 unknown column 'price'

``-- E:`` is an error, ``-- W:`` a warning; the code comes first, then the full message.
Several expectations on one line follow each other: ``-- E: ... -- W: ...``. ``--`` is
the language's own line comment, so the expectations do not change the program. Only this
exact form is an expectation; any other ``--`` comment is part of the program. A case
without expectations must compile with no diagnostic at all, warnings included, and its
name ends with ``_clean``; every other case expects at least one diagnostic.

``pytest --update-data`` rewrites the expectation comments from the actual output.
Cases in files named ``untrusted*.test`` compile with ``trusted=False`` (docs/security.md).
Lines before the first case may only be blank or ``--`` comments (a file's description).
"""

from __future__ import annotations

import ast as pyast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import flowc

DATA_DIR = Path(__file__).parent / "data" / "check"

_HEADER = re.compile(r"^\[case ([A-Za-z0-9_-]+)\]\s*$")
_MARKER = re.compile(r"\s*-- ([EW]): ")
_EXPECTATION = re.compile(r"^([EW]\d{4}) (.+?)\s*$")

# (line in the .test file, severity letter, code, message)
Expectation = tuple[int, str, str, str]


@dataclass(frozen=True)
class Case:
    path: Path
    name: str
    first_line: int  # line of the .test file holding the program's line 1
    lines: tuple[str, ...]

    @property
    def filename(self) -> str:
        return f"{self.name}.flow"

    @property
    def program(self) -> str:
        return "\n".join(self.lines) + "\n"

    def file_line(self, program_line: int) -> int:
        return self.first_line + program_line - 1


def split_expectations(line: str) -> tuple[str, list[tuple[str, str]]]:
    """A program line's code part, and its ``(severity, "CODE message")`` expectations."""
    match = _MARKER.search(line)
    if match is None:
        return line, []
    code = line[: match.start()]
    parts = _MARKER.split(line[match.start() :])
    # split() yields ['', sev, text, sev, text, ...]
    pairs = [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]
    return code, pairs


def parse_data_file(path: Path) -> list[Case]:
    lines = path.read_text(encoding="utf-8").split("\n")
    cases: list[Case] = []
    name: str | None = None
    start = 0
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        while body and not body[-1].strip():
            body.pop()
        if not body:
            raise ValueError(f"{path}:{start}: case '{name}' has no program")
        cases.append(Case(path, name, start, tuple(body)))

    for number, line in enumerate(lines, start=1):
        header = _HEADER.match(line)
        if header is not None:
            close()
            name, start, body = header.group(1), number + 1, []
            if any(c.name == name for c in cases):
                raise ValueError(f"{path}:{number}: duplicate case name '{name}'")
            continue
        if name is None:
            if line.strip() and not line.lstrip().startswith("--"):
                raise ValueError(f"{path}:{number}: text before the first [case ...] header")
            continue
        body.append(line)
    close()
    return cases


def expected_diagnostics(case: Case) -> list[Expectation]:
    out: list[Expectation] = []
    for offset, line in enumerate(case.lines):
        number = case.first_line + offset
        for severity, text in split_expectations(line)[1]:
            match = _EXPECTATION.match(text)
            if match is None:
                raise ValueError(
                    f"{case.path}:{number}: malformed expectation '-- {severity}: {text}' "
                    "(write '-- E: E0123 message')"
                )
            out.append((number, severity, match.group(1), match.group(2)))
    return sorted(out)


def actual_diagnostics(case: Case) -> list[Expectation]:
    # The cases of untrusted*.test are programs from someone flowc does not trust.
    trusted = not case.path.name.startswith("untrusted")
    try:
        job = flowc.compile(case.program, filename=case.filename, for_spark=True, trusted=trusted)
    except flowc.CompileError as error:
        diagnostics = error.diagnostics
        assert any(d.severity is flowc.Severity.ERROR for d in diagnostics), (
            "CompileError raised without an error diagnostic"
        )
    else:
        diagnostics = job.diagnostics
        assert all(d.severity is flowc.Severity.WARNING for d in diagnostics), (
            "a compiled job carries an error diagnostic"
        )
    out: list[Expectation] = []
    problems: list[str] = []
    for d in diagnostics:
        if d.span.file != case.filename:
            problems.append(f"{d.code}: span names file {d.span.file!r}, not {case.filename!r}")
        if "\n" in d.message:
            problems.append(f"{d.code}: message spans several lines: {d.message!r}")
        if not 1 <= d.span.line <= len(case.lines):
            problems.append(
                f"{d.code} {d.message}: reported at line {d.span.line}, outside the program "
                f"(lines 1..{len(case.lines)})"
            )
        letter = "E" if d.severity is flowc.Severity.ERROR else "W"
        out.append((case.file_line(d.span.line), letter, d.code, d.message))
    if problems:
        pytest.fail(f"{case.path.name}::{case.name}:\n  " + "\n  ".join(problems), pytrace=False)
    return sorted(out)


def _format(items: list[Expectation]) -> list[str]:
    return [f"{line}: -- {severity}: {code} {message}" for line, severity, code, message in items]


def update_data_file(case: Case, actual: list[Expectation]) -> None:
    """Rewrite the expectation comments of one case (the file's line count never changes)."""
    lines = case.path.read_text(encoding="utf-8").split("\n")
    by_line: dict[int, list[str]] = {}
    for number, severity, code, message in actual:
        by_line.setdefault(number, []).append(f"-- {severity}: {code} {message}")
    for offset in range(len(case.lines)):
        index = case.first_line + offset - 1
        code = split_expectations(lines[index])[0].rstrip()
        wanted = by_line.get(index + 1)
        if wanted:
            code = (code + "  " if code.strip() else code) + " ".join(wanted)
        lines[index] = code
    case.path.write_text("\n".join(lines), encoding="utf-8")


def _all_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(DATA_DIR.glob("*.test")):
        cases.extend(parse_data_file(path))
    return cases


CASES = _all_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.path.stem}::{c.name}" for c in CASES])
def test_check_case(case: Case, request: pytest.FixtureRequest) -> None:
    actual = actual_diagnostics(case)
    if request.config.getoption("--update-data"):
        if actual != expected_diagnostics(case):
            update_data_file(case, actual)
        return
    expected = expected_diagnostics(case)
    if actual != expected:
        diff = difflib.unified_diff(
            _format(expected), _format(actual), "expected", "actual", lineterm=""
        )
        pytest.fail(
            f"{case.path.name}::{case.name} (case starts at line {case.first_line - 1}):\n"
            + "\n".join(diff),
            pytrace=False,
        )


# ---------------------------------------------------------------- the runner itself


def test_data_files_exist_and_cover_many_cases() -> None:
    names = {p.name for p in DATA_DIR.glob("*.test")}
    assert {
        "names.test",
        "settings.test",
        "hints.test",
        "connectors.test",
        "steps.test",
        "types.test",
        "sql.test",
        "syntax.test",
    } <= names
    assert len(CASES) > 100


def _codes_in_the_compiler() -> set[str]:
    """Codes reported by the modules the compile pipeline imports (from flowc.passes on)."""
    package = Path(flowc.__file__).resolve().parent
    pending, modules = ["passes"], set()
    sources: dict[str, Path] = {}
    while pending:
        module = pending.pop()
        path = package / module.replace(".", "/")
        source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if module in modules or not source.exists():
            continue
        modules.add(module)
        sources[module] = source
        tree = pyast.parse(source.read_text(encoding="utf-8"))
        for node in pyast.walk(tree):
            if isinstance(node, pyast.ImportFrom) and node.module:
                if node.module == "flowc":
                    pending.extend(alias.name for alias in node.names)
                elif node.module.startswith("flowc."):
                    pending.append(node.module.removeprefix("flowc."))
            elif isinstance(node, pyast.Import):
                pending.extend(
                    a.name.removeprefix("flowc.") for a in node.names if a.name.startswith("flowc.")
                )
    codes: set[str] = set()
    for source in sources.values():
        text = source.read_text(encoding="utf-8")
        codes.update(re.findall(r"\bCode\.([EW]\d{4})\b", text))
    return codes


def test_every_diagnostic_code_has_a_failing_case() -> None:
    """Each code the compiler can report appears in at least one expectation."""
    # Read the files again: --update-data may have rewritten them during this run.
    seen = {code for case in _all_cases() for _, _, code, _ in expected_diagnostics(case)}
    in_compiler = _codes_in_the_compiler()
    assert len(in_compiler) > 40
    required = in_compiler | {
        *(f"E000{i}" for i in range(1, 5)),
        *(f"E010{i}" for i in range(1, 7)),
        *(f"E02{i:02d}" for i in range(1, 24)),
        *(f"E030{i}" for i in range(1, 8)),
        *(f"E04{i:02d}" for i in range(1, 11)),
        "E0501",
        "E0601",
        "W0001",
        "W0003",
        "W0004",
        "W0005",
    }
    # Codes no program text can cause, tested where their cause is: --set in test_run.py.
    from_the_command_line = {"E0411"}
    # Codes only megabytes of program text can cause (the source's and a literal's length,
    # docs/limits.md), tested where their cause is: test_limits.py.
    only_huge_text = {"E0901", "E0902"}
    # Codes only files on disk can cause (a folder too large to look through, a module file
    # linked out of the base directory), tested where their cause is: test_trust_layers.py.
    only_files = {"E0959", "E0960"}
    # A lone surrogate: a str given to flowc.compile may hold one, no file (a case) can;
    # tested in test_hostile_inputs.py.
    only_in_a_str = {"E0904"}
    assert (
        required - seen - from_the_command_line - only_huge_text - only_files - only_in_a_str
        == set()
    )


def test_clean_cases_and_only_those_expect_nothing() -> None:
    """``*_clean`` cases are valid programs; every other case expects a diagnostic.

    So --update-data cannot silently turn a failing case into a passing one, or the reverse.
    """
    cases = _all_cases()
    clean = [c.name for c in cases if c.name.endswith("_clean")]
    assert len(clean) >= 30
    assert [c.name for c in cases if c.name.endswith("_clean") and expected_diagnostics(c)] == []
    assert [
        c.name for c in cases if not c.name.endswith("_clean") and not expected_diagnostics(c)
    ] == []


def test_split_expectations_only_recognises_the_exact_form() -> None:
    assert split_expectations("FROM s -- a plain comment") == ("FROM s -- a plain comment", [])
    assert split_expectations("x -- e: lower case is not one") == (
        "x -- e: lower case is not one",
        [],
    )
    assert split_expectations("x --E: no space is not one")[1] == []
    assert split_expectations("x -- X: other letters are not one")[1] == []
    code, pairs = split_expectations("x; -- note -- E: E0101 a 'b' -- W: W0004 c")
    assert code == "x; -- note"
    assert pairs == [("E", "E0101 a 'b'"), ("W", "W0004 c")]


def test_parse_data_file_and_update_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "demo.test"
    path.write_text(
        "-- a description\n"
        "[case first]\n"
        "SET paralellism = 4;  -- E: E0999 stale\n"
        "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s;\n"
        "\n"
        "[case second]\n"
        "CREATE SINK o WITH (connector = 'console');\n",
        encoding="utf-8",
    )
    first, second = parse_data_file(path)
    assert (first.name, first.first_line, len(first.lines)) == ("first", 3, 4)
    assert (second.name, second.first_line, second.lines) == (
        "second",
        9,
        ("CREATE SINK o WITH (connector = 'console');",),
    )
    assert expected_diagnostics(first) == [(3, "E", "E0999", "stale")]
    # The expectation comment is a comment: the program still parses.
    actual = actual_diagnostics(first)
    assert actual == [(3, "E", "E0301", "unknown setting 'paralellism'")]
    update_data_file(first, actual)
    text = path.read_text(encoding="utf-8")
    assert "SET paralellism = 4;  -- E: E0301 unknown setting 'paralellism'\n" in text
    assert "E0999" not in text
    reparsed = parse_data_file(path)[0]
    assert expected_diagnostics(reparsed) == actual


def test_parse_data_file_rejects_duplicate_names_and_stray_text(tmp_path: Path) -> None:
    path = tmp_path / "bad.test"
    path.write_text("[case a]\nSET x = 1;\n[case a]\nSET y = 1;\n", encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate case name 'a'"):
        parse_data_file(path)
    path.write_text("SET x = 1;\n[case a]\nSET y = 1;\n", encoding="utf-8")
    with pytest.raises(ValueError, match="before the first"):
        parse_data_file(path)
