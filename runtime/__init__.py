"""Running a compiled job on Spark: the checks made before Spark starts (sink folders,
checkpoints, the state a checkpoint holds), the Spark session, and what a run reports.

This package is the only part of flowc that imports pyspark; the compiler never does
(its code generation, :mod:`flowc.spark.codegen`, writes a program that imports it).

May import: every stage of the compiler (it compiles and runs jobs), never
:mod:`flowc.cli`; only the command line's ``run``, ``test``, ``spark`` and ``diff
--against`` import it, inside the command.
"""
