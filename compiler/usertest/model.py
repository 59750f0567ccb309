"""What a ``flowc test`` file holds, once read and checked against its job."""

from __future__ import annotations

from collections.abc import Sequence

from flowc.diagnostics import Diagnostic
from flowc.fast_dataclass import dataclass
from flowc.spans import Span

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
    #: ``mode: batch`` or ``streaming``: the job runs in that mode whatever it sets
    #: (batch as ``flowc run --batch``); None: in the job's own mode.
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class TestFile:
    path: str
    job_path: str
    tests: tuple[UserTest, ...]
