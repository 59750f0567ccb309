"""The SQL of expressions, in Spark's dialect: sqlglot's parsing with flowc's limits
(``sql_parsing``), types (``sqltypes``, ``spark_typing``), the function catalogue
(``spark_functions``, ``functions``, ``python_functions``), Spark SQL text
(``spark_sql``, ``spark_literals``, ``spark_casts``, ``spark_patterns``,
``spark_distinct``), other dialects' habits (``habits``) and SQL queries lowered to pipe
steps (``lower_sql``, ``sql_forms``).

May import: the core modules (``flowc.ast``, ``flowc.program``, ``flowc.catalog``,
``flowc.diagnostics``...) and :mod:`flowc.flink`. Everything above uses it; it uses
nothing above (tests/test_layers.py).
"""
