"""Running a compiled job on Spark: the checks made before Spark starts (sink folders,
checkpoints, the state a checkpoint holds), the Spark session, and what a run reports.

This package is the only part of flowc that imports pyspark; the compiler never does
(its code generation, :mod:`flowc.codegen`, writes a program that imports it).
"""
