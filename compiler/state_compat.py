"""The state-compatibility API in one place: what a job keeps in state
(:func:`describe_state`) and whether an edited job can go on from it (:func:`compare`).

The code is in :mod:`flowc.state` (its docstring says what is compared and why); this
module is the name ``flowc run``'s restart guard, ``flowc diff`` and ``docs/state.md``
use.
"""

from flowc.state.compare import compare
from flowc.state.describe import describe_state
from flowc.state.findings import INCOMPATIBLE_CODE, Finding, StateComparison, Verdict, ways_out
from flowc.state.manifest import QueryState, StatefulOperator, StateManifest

__all__ = [
    "INCOMPATIBLE_CODE",
    "Finding",
    "QueryState",
    "StateComparison",
    "StateManifest",
    "StatefulOperator",
    "Verdict",
    "compare",
    "describe_state",
    "ways_out",
]
