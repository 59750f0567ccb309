"""What an edit does to a job's plans: the plan half of ``flowc diff OLD.flow NEW.flow``.

The state half (which stateful operators keep their state) is :mod:`flowc.state`'s;
this package lists the plan changes around it:

- **vertices**: JobGraph vertices added, removed and re-chained. Vertices are matched by
  their operators: an old and a new vertex are the same when they hold the same operators
  in the same order; vertices that share operators otherwise were re-chained (split,
  merged, or an operator joined or left the chain).
- **exchanges**: a consumer's input whose ship strategy or keys changed (or that appeared
  or went away while its consumer stayed).
- **parallelism**: a vertex's parallelism or max parallelism (with Flink's default when
  unset: a keyed vertex's key groups are fixed by it).
- **operator ids**: an operator whose id changed. An auto-generated id is a hash of the
  topology before the operator, so it changes with any edit upstream; Flink matches state
  by these ids, so the advice is to pin a ``uid``.
- **spark**: shuffle partitions, queries added or removed, and each query's exchanges.

Operators are matched first by id (a pinned ``uid`` or an unchanged position), then, for
those left, by name and what they read and feed (and the step's source text), one tier
after another: each tier is a dictionary lookup, so matching is linear in the graphs, and
every list comes out in a fixed order (the new plan's topological order, then the old's
for what was removed).

The modules, top-down: :mod:`~flowc.diff.changes` (the records and :class:`PlanDiff`),
:mod:`~flowc.diff.sides` (a job indexed, and the matching of operators),
:mod:`~flowc.diff.plans` (``diff_plans``) and :mod:`~flowc.diff.report` (what ``flowc
diff`` prints). The package exports the names other code uses.

May import: every stage up to the driver (:mod:`flowc.graph`, :mod:`flowc.spark`,
:mod:`flowc.state`...); never :mod:`flowc.runtime`, so ``flowc diff`` without
``--against`` never loads pyspark.
"""

from flowc.diff.changes import PlanDiff
from flowc.diff.plans import diff_plans
from flowc.diff.report import DIFF_SCHEMA_VERSION, CheckpointCheck, DiffReport

__all__ = ["DIFF_SCHEMA_VERSION", "CheckpointCheck", "DiffReport", "PlanDiff", "diff_plans"]
