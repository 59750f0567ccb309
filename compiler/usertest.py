"""``flowc test``: tests for users' own jobs, in YAML files beside them (docs/testing.md).

This module reads the test files (every error located at its line and column in the YAML),
turns a job into its test form (each source reads only the rows the test gives, each sink
is captured), compares results and writes the report; running on Spark is
:mod:`flowc.runtime.user_tests`'s. Anchors: dbt's and SQLMesh's YAML unit tests, ksqlDB's
test runner.

A test file ``NAME.test.yaml`` beside ``NAME.flow``::

    tests:
      - name: two clicks in one minute
        given:
          clicks:                      # a source: rows, or batches of rows
            - [{user_id: a, url: x, ts: "2026-01-01 09:00:05"}]
            - [{user_id: a, url: y, ts: "2026-01-01 09:02:00"}]
        expect:
          per_user:                    # a sink: the rows it holds at the end
            - {user_id: a, clicks: 1}
"""

from __future__ import annotations

import datetime
import decimal
import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from flowc.catalog import is_upsert
from flowc.diagnostics import Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.program import Program, SinkDef, SourceDef
from flowc.spans import Span
from flowc.upsert_sinks import upsert_key

TEST_SUFFIX = ".test.yaml"
#: The stages ``flowc test --plans`` locks, as JSON.
PLAN_STAGES = ("transformations", "streamgraph", "jobgraph", "physical")

Value = object
Row = dict[str, Value]


class TestFileError(Exception):
    """A test file flowc cannot run: its diagnostics."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__("\n".join(d.message for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


@dataclass(frozen=True, slots=True)
class GivenRows:
    """A source's rows, in micro-batches, and where each row is in the YAML."""

    source: str
    batches: tuple[tuple[Row, ...], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ExpectedRows:
    sink: str
    rows: tuple[Row, ...]
    #: For an updating sink without a ``key`` option: the columns that identify a row.
    key: tuple[str, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class UserTest:
    name: str
    given: tuple[GivenRows, ...]
    expect: tuple[ExpectedRows, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TestFile:
    path: str
    job_path: str
    tests: tuple[UserTest, ...]


# ---------------------------------------------------------------- reading test files


def load_test_file(path: str, job: CompiledJob) -> TestFile:
    """Read and check ``path`` against the job's sources, sinks and columns."""
    text = Path(path).read_text(encoding="utf-8")
    problems: list[Diagnostic] = []
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise TestFileError(
            [_error(f"not valid YAML: {getattr(error, 'problem', error)}", path, line, column)]
        ) from None
    reader = _Reader(path, job, problems)
    tests = reader.file(root)
    if problems:
        raise TestFileError(problems)
    return TestFile(path, job.file, tests)


def _error(message: str, file: str, line: int, column: int, help: str | None = None) -> Diagnostic:
    return Diagnostic(
        Code.E0830, Severity.ERROR, message, Span(file, line, column, line, column + 1), help
    )


class _Reader:
    """Walks the YAML nodes, keeping each one's position for its diagnostics."""

    def __init__(self, path: str, job: CompiledJob, problems: list[Diagnostic]) -> None:
        self.path = path
        self.job = job
        self.problems = problems
        program = job.program
        self.sources = {s.name: s for s in program.sources}
        self.sinks = {s.name: s for s in program.sinks}
        self.written = {i.sink: i.stream.schema for i in program.inserts}

    def span(self, node: object) -> Span:
        mark = getattr(node, "start_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return Span(self.path, line, column, line, column + 1)

    def fail(self, node: object, message: str, help: str | None = None) -> None:
        span = self.span(node)
        self.problems.append(_error(message, span.file, span.line, span.column, help))

    def mapping(self, node: object, what: str) -> list[tuple[object, object]]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping (key: value)")
            return []
        return list(node.value)

    def sequence(self, node: object, what: str) -> list[object]:
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"{what} must be a list")
            return []
        return list(node.value)

    def file(self, root: object) -> tuple[UserTest, ...]:
        if root is None:
            self.problems.append(_error("the test file is empty", self.path, 1, 1))
            return ()
        entries = dict((str(_scalar(k)), (k, v)) for k, v in self.mapping(root, "a test file"))
        for key, (node, _) in entries.items():
            if key != "tests":
                self.fail(node, f"unknown key '{key}'", "a test file has one key: tests")
        if "tests" not in entries:
            self.fail(root, "no 'tests' in the test file")
            return ()
        tests = [self.test(t) for t in self.sequence(entries["tests"][1], "'tests'")]
        names = Counter(t.name for t in tests)
        for test in tests:
            if names[test.name] > 1:
                self.problems.append(
                    _error(f"two tests are named '{test.name}'", self.path, test.span.line, 1)
                )
                names[test.name] = 0
        return tuple(tests)

    def test(self, node: object) -> UserTest:
        fields = {str(_scalar(k)): (k, v) for k, v in self.mapping(node, "a test")}
        for key, (k, _) in fields.items():
            if key not in ("name", "given", "expect"):
                self.fail(k, f"unknown key '{key}'", "a test has: name, given, expect")
        name = str(_scalar(fields["name"][1])) if "name" in fields else ""
        if not name:
            self.fail(node, "a test without a name", "add name: what the test shows")
        given = (
            tuple(
                self.given(k, v)
                for k, v in self.mapping(fields.get("given", (None, None))[1], "'given'")
            )
            if "given" in fields
            else ()
        )
        if "expect" not in fields:
            self.fail(node, f"test '{name}' expects nothing", "add expect: rows per sink")
        expect = (
            tuple(self.expect(k, v) for k, v in self.mapping(fields["expect"][1], "'expect'"))
            if "expect" in fields
            else ()
        )
        return UserTest(name, given, expect, self.span(node))

    def given(self, key: object, node: object) -> GivenRows:
        name = str(_scalar(key))
        source = self.sources.get(name)
        if source is None:
            self.fail(key, f"the job has no source '{name}'", _known(self.sources))
            return GivenRows(name, (), self.span(key))
        items = self.sequence(node, f"the rows of '{name}'")
        batched = bool(items) and all(isinstance(i, yaml.SequenceNode) for i in items)
        groups = [self.sequence(i, "a batch") for i in items] if batched else [items]
        columns = {c.name: c.type for c in source.schema}
        batches = tuple(
            tuple(self.row(r, columns, f"source '{name}'") for r in group) for group in groups
        )
        return GivenRows(name, batches, self.span(key))

    def expect(self, key: object, node: object) -> ExpectedRows:
        name = str(_scalar(key))
        sink = self.sinks.get(name)
        span = self.span(key)
        if sink is None or name not in self.written:
            self.fail(key, f"the job writes no sink '{name}'", _known(self.written))
            return ExpectedRows(name, (), (), span)
        columns = {c.name: c.type for c in self.written[name]}
        items = node
        declared_key: tuple[str, ...] = ()
        if isinstance(node, yaml.MappingNode):
            parts = {str(_scalar(k)): (k, v) for k, v in node.value}
            for part, (k, _) in parts.items():
                if part not in ("key", "rows"):
                    self.fail(k, f"unknown key '{part}'", "a sink's expectation has: key, rows")
            if "key" in parts:
                items_of_key = self.sequence(parts["key"][1], "'key'")
                declared_key = tuple(str(_scalar(c)) for c in items_of_key)
                for column, item in zip(declared_key, items_of_key, strict=True):
                    if column not in columns:
                        self.fail(item, f"sink '{name}' has no column '{column}'", _known(columns))
            items = parts.get("rows", (None, None))[1]
        rows = tuple(
            self.row(r, columns, f"sink '{name}'") for r in self.sequence(items, f"'{name}'")
        )
        row_key = declared_key
        if sink.mode != "append" and not row_key:
            row_key = upsert_key(sink) if is_upsert(sink.connector, sink.mode) else ()
            if not row_key:
                self.fail(
                    key,
                    f"sink '{name}' is updated ({sink.mode} mode): say which columns identify "
                    "a row of its results",
                    f"write {name}: {{key: [column, ...], rows: [...]}}",
                )
        return ExpectedRows(name, rows, tuple(row_key), span)

    def row(self, node: object, columns: Mapping[str, str], owner: str) -> Row:
        row: Row = {}
        for k, v in self.mapping(node, f"a row of {owner}"):
            name = str(_scalar(k))
            if name not in columns:
                self.fail(k, f"{owner} has no column '{name}'", _known(columns))
                continue
            row[name] = _python(v)
        return row


def _known(names: Mapping[str, object]) -> str:
    return "known: " + (", ".join(sorted(names)) or "none")


def _scalar(node: object) -> object:
    if isinstance(node, yaml.ScalarNode):
        return node.value
    return None


def _python(node: object) -> Value:
    """A YAML value as Python: YAML's own types, so 12 is a number and '12' a string."""
    value: Value = yaml.safe_load(yaml.serialize(node))
    return value


# ---------------------------------------------------------------- the job's test form


def test_program(program: Program, inputs: Mapping[str, str]) -> Program:
    """The program every source of which reads JSON files from ``inputs[name]`` (one file
    a micro-batch) and every sink of which is Spark's memory sink (its rows are read back
    by query name), so a test touches nothing of the job's real inputs and outputs."""

    def source(s: SourceDef) -> SourceDef:
        options: tuple[tuple[str, object], ...] = (
            ("path", inputs[s.name]),
            ("format", "json"),
        )
        if not s.bounded:
            options += (("max_files_per_trigger", 1),)
        return replace(s, connector="files", options=options, watermark=s.watermark)

    def sink(s: SinkDef) -> SinkDef:
        return replace(s, connector="memory", options=())

    return replace(
        program,
        sources=tuple(source(s) for s in program.sources),
        sinks=tuple(sink(s) for s in program.sinks),
        _index={},  # the lookup index is built anew, from the new definitions
    )


# ---------------------------------------------------------------- comparing rows


def canonical(value: Value) -> str:
    """One text for values that mean the same: 2 and 2.0 and Decimal('2.00'), a timestamp
    with ' ' or 'T' and with or without zero seconds' fraction, lists and maps as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        number = decimal.Decimal(str(value))
        return "0" if number == 0 else format(number.normalize(), "f")
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ").removesuffix(".000000")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str) and len(value) > 10 and value[4:5] == "-" and value[7:8] == "-":
        try:  # a timestamp written as text: 'T' or ' ', with or without a fraction
            return canonical(datetime.datetime.fromisoformat(value))
        except ValueError:
            return value
    if isinstance(value, Mapping):
        return json.dumps({str(k): canonical(v) for k, v in value.items()}, sort_keys=True)
    if isinstance(value, list | tuple):
        return json.dumps([canonical(v) for v in value])
    return str(value)


def _canonical_row(row: Mapping[str, Value], columns: Sequence[str]) -> tuple[str, ...]:
    return tuple(canonical(row.get(c)) for c in columns)


@dataclass(frozen=True, slots=True)
class SinkResult:
    sink: str
    columns: tuple[str, ...]
    missing: tuple[tuple[str, ...], ...]
    unexpected: tuple[tuple[str, ...], ...]

    @property
    def passed(self) -> bool:
        return not self.missing and not self.unexpected


def compare(expected: ExpectedRows, got: Sequence[Row], all_columns: Sequence[str]) -> SinkResult:
    """Order-insensitive: the multiset of expected rows against what the sink holds. Only
    the columns the test names are compared; an updating sink holds the last row per key."""
    named = [c for c in all_columns if any(c in r for r in expected.rows)] or list(all_columns)
    held = list(got)
    if expected.key:
        last: dict[tuple[str, ...], Row] = {}
        for row in held:
            last[_canonical_row(row, expected.key)] = row
        held = list(last.values())
    want = Counter(_canonical_row(r, named) for r in expected.rows)
    have = Counter(_canonical_row(r, named) for r in held)
    return SinkResult(
        expected.sink,
        tuple(named),
        tuple(sorted((want - have).elements())),
        tuple(sorted((have - want).elements())),
    )


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as an aligned text table."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    line = " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
    out = [line, "-+-".join("-" * w for w in widths)]
    out += [
        " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return out


def diff_text(result: SinkResult) -> str:
    """What a failed sink shows: the rows missing and the rows not expected."""
    parts = [f"sink '{result.sink}':"]
    if result.missing:
        parts.append(f"  expected but not written ({len(result.missing)}):")
        parts += ["    " + line for line in table(result.columns, result.missing)]
    if result.unexpected:
        parts.append(f"  written but not expected ({len(result.unexpected)}):")
        parts += ["    " + line for line in table(result.columns, result.unexpected)]
    return "\n".join(parts)


# ---------------------------------------------------------------- outcomes and reports


@dataclass(slots=True)
class TestOutcome:
    file: str
    name: str
    seconds: float
    failure: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.failure is None and self.error is None


@dataclass(slots=True)
class TestRun:
    outcomes: list[TestOutcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    def summary(self) -> str:
        failed = sum(1 for o in self.outcomes if not o.passed)
        return f"{len(self.outcomes) - failed} passed, {failed} failed"

    def junit_xml(self) -> str:
        """JUnit XML for CI: one testcase per test, a failure's message its diff."""
        suite = ET.Element(
            "testsuite",
            name="flowc test",
            tests=str(len(self.outcomes)),
            failures=str(sum(1 for o in self.outcomes if o.failure is not None)),
            errors=str(sum(1 for o in self.outcomes if o.error is not None)),
            time=f"{sum(o.seconds for o in self.outcomes):.3f}",
        )
        for outcome in self.outcomes:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=outcome.file,
                name=outcome.name,
                time=f"{outcome.seconds:.3f}",
            )
            if outcome.failure is not None:
                ET.SubElement(case, "failure", message="rows differ").text = outcome.failure
            if outcome.error is not None:
                ET.SubElement(case, "error", message="the job failed").text = outcome.error
        return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def test_files(paths: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(test file, its job) for files and folders given (a folder: every *.test.yaml under
    it); a test file's job is the .flow beside it with the same name."""
    for given in paths:
        path = Path(given)
        found = sorted(path.rglob(f"*{TEST_SUFFIX}")) if path.is_dir() else [path]
        for test in found:
            job = test.with_name(test.name.removesuffix(TEST_SUFFIX) + ".flow")
            yield str(test), str(job)
