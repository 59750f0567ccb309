"""The state-compatibility API in one place: what a job keeps in state
(:func:`describe_state`) and whether an edited job can go on from it (:func:`compare`).

The code is in :mod:`flowc.state` (its docstring says what is compared and why); this
module is the name ``flowc run``'s restart guard, ``flowc diff`` and ``docs/state.md``
use.
"""

from flowc.state.compare import compare
from flowc.state.describe import describe_state
from flowc.state.findings import (
    COMPARISON_FORMAT,
    INCOMPATIBLE_CODE,
    RESCALED_CODE,
    Finding,
    OperatorComparison,
    QueryComparison,
    StateComparison,
    Verdict,
    ways_out,
)
from flowc.state.manifest import (
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    AggregateState,
    JoinState,
    Location,
    QueryState,
    SinkWrite,
    SourceRead,
    StateColumn,
    StatefulOperator,
    StateManifest,
    WatermarkState,
    WindowState,
)

__all__ = [
    "COMPARISON_FORMAT",
    "INCOMPATIBLE_CODE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "RESCALED_CODE",
    "AggregateState",
    "Finding",
    "JoinState",
    "Location",
    "OperatorComparison",
    "QueryComparison",
    "QueryState",
    "SinkWrite",
    "SourceRead",
    "StateColumn",
    "StateComparison",
    "StateManifest",
    "StatefulOperator",
    "Verdict",
    "WatermarkState",
    "WindowState",
    "compare",
    "describe_state",
    "ways_out",
]
