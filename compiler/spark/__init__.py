"""The Spark backend: Spark's streaming rules (``streaming``, E07xx) and checks
(``spark_checks``), the Spark realization of a job (``spark_plan``: queries, exchanges,
state, every decision code generation reads), and the generated PySpark program
(``codegen`` with ``codegen_sources``, ``codegen_steps``, ``codegen_sinks``, and the
functions it copies, ``generated_runtime``).

May import: every stage below it (core, :mod:`flowc.flink`, :mod:`flowc.sql`,
:mod:`flowc.syntax`, :mod:`flowc.trust`, :mod:`flowc.analyze`, :mod:`flowc.graph`);
never pyspark, which only :mod:`flowc.runtime` imports.
"""
