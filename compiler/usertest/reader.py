"""Reading a test file: YAML nodes, not loaded values, so every error is located at the
line and column of the key the user wrote (pyyaml's nodes carry their marks)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import yaml

from flowc.analyze.upsert_sinks import upsert_key
from flowc.catalog import is_upsert
from flowc.diagnostics import Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.spans import Span, undecodable_at
from flowc.usertest.model import (
    ExpectedRows,
    GivenRows,
    Row,
    TestFile,
    TestFileError,
    UserTest,
    Value,
)
from flowc.usertest.safe_yaml import MAX_TEST_FILE_BYTES, YamlRefused, compose


def load_test_file(path: str, job: CompiledJob) -> TestFile:
    """Read and check ``path`` against the job's sources, sinks and columns."""
    text = _read(path)
    problems: list[Diagnostic] = []
    try:
        root = compose(text)
    except YamlRefused as refused:
        raise TestFileError(
            [
                Diagnostic(
                    refused.code,
                    Severity.ERROR,
                    refused.message,
                    Span(path, refused.line, refused.column, refused.line, refused.column + 1),
                    refused.help,
                )
            ]
        ) from None
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


def _read(path: str) -> str:
    """The test file's text: at most MAX_TEST_FILE_BYTES (E0831, before it is read), UTF-8
    (E0830 at the first byte that is not)."""
    with open(path, "rb") as file:
        data = file.read(MAX_TEST_FILE_BYTES + 1)
    if len(data) > MAX_TEST_FILE_BYTES:
        raise TestFileError(
            [
                Diagnostic(
                    Code.E0831,
                    Severity.ERROR,
                    f"the test file is larger than flowc's bound of {MAX_TEST_FILE_BYTES:,} bytes",
                    Span(path, 1, 1, 1, 2),
                    "a test needs a few rows: split the file or write fewer",
                )
            ]
        )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line, column = undecodable_at(data, error)
        raise TestFileError(
            [
                _error(
                    f"not valid UTF-8 (byte 0x{data[error.start]:02x})",
                    path,
                    line,
                    column,
                    "save the file as UTF-8",
                )
            ]
        ) from None


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
            if key not in ("name", "mode", "given", "expect"):
                self.fail(k, f"unknown key '{key}'", "a test has: name, mode, given, expect")
        mode: str | None = None
        if "mode" in fields:
            mode = str(_scalar(fields["mode"][1]))
            if mode not in ("streaming", "batch"):
                self.fail(
                    fields["mode"][1],
                    f"unknown mode '{mode}'",
                    "mode: batch runs the test as flowc run --batch, mode: streaming as "
                    "flowc run; without it, in the job's own mode",
                )
                mode = None
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
        return UserTest(name, given, expect, self.span(node), mode=mode)

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
