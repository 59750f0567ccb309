"""What a job keeps in state, and whether an edited job can go on from it.

A streaming job lives for months and is edited while its state lives on in a checkpoint.
Spark checks little when it restarts on one (``../shared/spec/spark-state.md``):
``count(*)`` → ``sum(v)`` of the same type reads the old counts as sums, grouping on
another column of the same name and type merges the old state in, reordered keys and a
new window size are taken silently, and a new ``spark.sql.shuffle.partitions`` is
ignored. Other edits fail only after Spark started, with a Java stack trace.

:func:`describe_state` says what each query keeps, as a :class:`StateManifest`: per query
(one per INSERT) its sources and sink, and per stateful operator, in Spark's stateful
operator order (Spark numbers them 0, 1, ... from the sink upstream and matches state to
operators by that number alone), its identity (uid, Flink's operator id, Spark's index),
kind, keys with their types, the state's values (aggregates, window, deduplicated
columns, join), the watermark, the parallelism and key groups, and where the step is in
the .flow file. Every column is described with its *lineage*: the expression over the
sources' columns it stands for, so that ``SELECT k2 AS k |> KEY BY k`` is not taken for
``KEY BY k``.

:func:`compare` classifies every stateful operator of every query of two manifests:

- ``unchanged``: nothing about it changed;
- ``compatible``: its state means the same (a filter or a projection added or removed
  around it, an output column renamed, a uid given): Spark and Flink keep the state;
- ``rescaled``: a new parallelism, max parallelism or number of shuffle partitions:
  Spark keeps the state in the first run's partitions (frozen in the checkpoint) and
  ignores the new value; Flink redistributes key groups (or refuses a new max
  parallelism);
- ``incompatible``: the state would be read wrongly or not at all: keys, aggregates,
  window, deduplicated columns or join changed, an operator removed, added or moved,
  a uid changed or removed; and, per query, sources or a file sink's folder changed.

Both are plain data with a stable JSON form (no time, no machine-dependent value); a
manifest's ``to_json()`` / ``from_json()`` round-trip. ``flowc run`` writes a query's
manifest beside its checkpoint and compares before the next run starts
(:mod:`flowc.runtime.state_guard`); ``flowc diff`` compares two files. The JSON forms are
documented in ``docs/state.md``.

The modules, top-down: :mod:`~flowc.state.manifest` (the records),
:mod:`~flowc.state.lineage` and :mod:`~flowc.state.describe` (describe_state),
:mod:`~flowc.state.findings` (what a comparison says), :mod:`~flowc.state.comparison`
(queries and the alignment of their operators) and :mod:`~flowc.state.operator_compare`
(one operator, aspect by aspect). The package exports the names
other code uses.

May import: the core modules, :mod:`flowc.flink`, :mod:`flowc.sql`,
:mod:`flowc.graph` and :mod:`flowc.spark`; the driver and the runtime import it.
"""

from flowc.state.comparison import compare
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
