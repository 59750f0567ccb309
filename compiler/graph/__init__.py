"""Flink's graph passes, in their order: the Transformation tree (``transformations``,
with operators' names from ``names``), the StreamGraph (``stream_graph``), the JobGraph
with operator chaining (``job_graph``) and the physical plan (``physical``: subtasks,
key groups, slots, regions; it carries the Spark realization the Spark backend planned).

May import: the core modules, :mod:`flowc.flink` (Flink's hashing and key groups),
:mod:`flowc.sql`, :mod:`flowc.syntax`, :mod:`flowc.trust` and :mod:`flowc.analyze`.
"""
