"""The Spark backend: code generation, the Spark session and running queries.

This package is the only part of flowc that imports pyspark; the compiler never does.
"""
