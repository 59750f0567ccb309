"""The YAML of a test file, composed with bounds: its size, its nesting, the values its
aliases expand to, no alias inside its own anchor, only YAML's core tags, and no lone
surrogate.

A test file is data a user (or a tool) hands flowc, so nothing in it may crash flowc,
run code or take unbounded time: pyyaml's SafeLoader constructs no Python objects, but
its composer recurses once a level, aliases may each repeat a whole tree ("billion
laughs": 703 bytes expanded to 800 MB of rows) and a tag such as ``!!set`` or
``!!python/object`` makes a value flowc cannot compare. Each bound is a located
diagnostic (docs/limits.md).
"""

from __future__ import annotations

import re

import yaml
from yaml.events import AliasEvent, Event, NodeEvent, ScalarEvent
from yaml.nodes import Node

from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass

#: Bytes of one test file (E0831): a test's rows are examples, not a data set.
MAX_TEST_FILE_BYTES = 1024 * 1024
#: YAML values of one test file, each alias counted as the values it stands for (E0833).
MAX_YAML_VALUES = 1_000_000
#: Nesting of YAML lists and mappings (E0835); a test file needs four or five.
MAX_YAML_NESTING = 64

#: A UTF-16 surrogate on its own, which YAML's escapes can make and no writer can write.
_SURROGATE = re.compile("[\ud800-\udfff]")
_CORE = "tag:yaml.org,2002:"
#: The tags a test file may write: YAML's core schema (what plain values resolve to).
ALLOWED_TAGS = frozenset(
    _CORE + name for name in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
)


@dataclass(frozen=True, slots=True)
class YamlRefused(Exception):
    """A test file past a bound, or with a tag or cycle flowc does not read."""

    code: Code
    message: str
    line: int
    column: int
    help: str


def _refuse(code: Code, message: str, event: Event, help: str) -> YamlRefused:
    mark = event.start_mark
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return YamlRefused(code, message, line, column, help)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts values (aliases as what they expand to) and levels,
    refuses an alias inside its own anchor and any tag outside the core schema."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._values = 0
        self._depth = 0
        self._open: set[str] = set()
        self._sizes: dict[str, int] = {}

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            alias = str(event.anchor)
            if alias in self._open:
                raise _refuse(
                    Code.E0834,
                    f"the alias *{alias} is inside its own anchor &{alias} (a cycle)",
                    event,
                    "repeat the values instead of the alias",
                )
            self._count(self._sizes.get(alias, 1), event)
            return super().compose_node(parent, index)
        assert isinstance(event, NodeEvent)
        tag: str | None = getattr(event, "tag", None)
        if tag is not None and tag != "!" and tag not in ALLOWED_TAGS:
            raise _refuse(
                Code.E0832,
                f"the tag {tag.replace(_CORE, '!!')} is not read in a test file",
                event,
                "write plain values: numbers, strings, true/false, null, lists, mappings",
            )
        if isinstance(event, ScalarEvent) and _SURROGATE.search(event.value):
            raise _refuse(
                Code.E0904,
                "the value holds a lone surrogate (an escape such as \\ud800), which is no "
                "character",
                event,
                "write the character itself, or a pair of escapes that make one",
            )
        self._depth += 1
        if self._depth > MAX_YAML_NESTING:
            raise _refuse(
                Code.E0835,
                f"lists and mappings nest {self._depth} deep; at most {MAX_YAML_NESTING} "
                "are allowed",
                event,
                "a test file needs a few levels: tests, given, rows, values",
            )
        before = self._values
        self._count(1, event)
        anchor = event.anchor
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)
        if anchor is not None:
            self._sizes[anchor] = self._values - before
        return node

    def _count(self, values: int, event: NodeEvent) -> None:
        self._values += values
        if self._values > MAX_YAML_VALUES:
            raise _refuse(
                Code.E0833,
                f"the test file holds more than {MAX_YAML_VALUES:,} values (each alias "
                "counted as the values it repeats)",
                event,
                "a test needs a few rows: write fewer, or fewer aliases of large values",
            )


def compose(text: str) -> Node | None:
    """The YAML nodes of a test file's text, within the bounds (YamlRefused past one;
    yaml.YAMLError where it is not YAML)."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()
