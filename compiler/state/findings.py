"""What a comparison of two state manifests says: verdicts, findings, and the per
operator, per query and per job results, with their JSON forms.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.state.manifest import (
    MANIFEST_VERSION,
    Location,
    QueryState,
    StatefulOperator,
)

COMPARISON_FORMAT = "flowc-state-comparison"


#: Diagnostic codes of the findings (the restart guard adds E0822).
INCOMPATIBLE_CODE = Code.E0820
RESCALED_CODE = Code.E0821
WARNING_CODE = Code.E0825

#: Lineage text longer than this is cut (with a digest, so it still compares exactly).
_MAX_LINEAGE = 400


class Verdict(StrEnum):
    """What an edit does to one stateful operator's state (worst last)."""

    UNCHANGED = "unchanged"
    COMPATIBLE = "compatible"
    RESCALED = "rescaled"
    INCOMPATIBLE = "incompatible"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {
    Verdict.UNCHANGED: 0,
    Verdict.COMPATIBLE: 1,
    Verdict.RESCALED: 2,
    Verdict.INCOMPATIBLE: 3,
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing an edit changed about an operator or a query.

    ``aspect`` names what changed: ``keys``, ``aggregates``, ``window``, ``within``,
    ``join``, ``processor``, ``kind``, ``uid``, ``operator_id``, ``removed``, ``added``, ``order``,
    ``parallelism``, ``max_parallelism``, ``shuffle_partitions``, ``watermark``,
    ``steps``, ``names``, ``sources``, ``sink``, ``query``, ``source_options``,
    ``source_columns``, ``sink_options``, ``settings``, ``state_store``, ``functions``.
    """

    verdict: Verdict
    aspect: str
    message: str
    help: str | None
    #: The old definition (text and span) and where it is now.
    old: Location | None
    new: Location | None
    #: A compatible change worth a warning (E0825): the state is kept, but what the job
    #: reads or writes from now on changes in a way the user should confirm.
    warning: bool = False

    @property
    def code(self) -> Code | None:
        if self.verdict is Verdict.INCOMPATIBLE:
            return INCOMPATIBLE_CODE
        if self.verdict is Verdict.RESCALED:
            return RESCALED_CODE
        if self.warning:
            return WARNING_CODE
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "code": self.code,
            "aspect": self.aspect,
            "message": self.message,
            "help": self.help,
            "old": None if self.old is None else self.old.to_json(),
            "new": None if self.new is None else self.new.to_json(),
        }


@dataclass(frozen=True, slots=True)
class OperatorComparison:
    """One stateful operator, old and new (either None when added or removed)."""

    query: str
    old: StatefulOperator | None
    new: StatefulOperator | None
    verdict: Verdict
    findings: tuple[Finding, ...]

    @property
    def name(self) -> str:
        operator = self.new if self.new is not None else self.old
        assert operator is not None
        return operator.name

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "name": self.name,
            "old_index": None if self.old is None else self.old.index,
            "new_index": None if self.new is None else self.new.index,
            "old": None if self.old is None else self.old.location.to_json(),
            "new": None if self.new is None else self.new.location.to_json(),
            "verdict": self.verdict.value,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class QueryComparison:
    """One query: its own findings (sources, sink, added, removed) and its operators'."""

    name: str
    old: QueryState | None
    new: QueryState | None
    findings: tuple[Finding, ...]
    operators: tuple[OperatorComparison, ...]

    @property
    def verdict(self) -> Verdict:
        verdicts = [f.verdict for f in self.findings] + [o.verdict for o in self.operators]
        return max(verdicts, key=lambda v: v.rank, default=Verdict.UNCHANGED)

    def all_findings(self) -> Iterator[Finding]:
        yield from self.findings
        for operator in self.operators:
            yield from operator.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "findings": [f.to_json() for f in self.findings],
            "operators": [o.to_json() for o in self.operators],
        }


@dataclass(frozen=True, slots=True)
class StateComparison:
    """Every query and stateful operator of two manifests, classified."""

    queries: tuple[QueryComparison, ...]

    @property
    def ok(self) -> bool:
        """False when any edit is incompatible with the old state."""
        return all(q.verdict is not Verdict.INCOMPATIBLE for q in self.queries)

    @property
    def verdict(self) -> Verdict:
        return max(
            (q.verdict for q in self.queries), key=lambda v: v.rank, default=Verdict.UNCHANGED
        )

    def query(self, name: str) -> QueryComparison | None:
        return next((q for q in self.queries if q.name == name), None)

    def findings(self) -> Iterator[tuple[str, Finding]]:
        """Every finding with its query's name, queries in order."""
        for query in self.queries:
            for finding in query.all_findings():
                yield query.name, finding

    def to_json(self) -> dict[str, Any]:
        return {
            "format": COMPARISON_FORMAT,
            "version": MANIFEST_VERSION,
            "ok": self.ok,
            "verdict": self.verdict.value,
            "queries": [q.to_json() for q in self.queries],
        }


_HELP_WAYS_OUT = (
    "revert the change; or keep the old state and start this query over with a new "
    "--checkpoint-dir, or with flowc run --reset-state {query} (moves its old checkpoint "
    "aside, never deletes it)"
)


def ways_out(query: str) -> str:
    """The help line of an incompatible edit: the ways out."""
    return _HELP_WAYS_OUT.format(query=query)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
