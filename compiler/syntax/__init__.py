"""The front end: a .flow file's text to its parse tree (:mod:`flowc.ast`). The LALR
driver over the grammar's tables (``lalr``, ``lalr_build``), statement splitting and line
indexes (``source_text``), the tree's builder (``ast_builder``, ``parser``), syntax
errors (``syntax_errors``), ``--set`` overrides on the tree (``overrides``) and the tree's
dump (``astdump``).

May import: the core modules, :mod:`flowc.grammar`, :mod:`flowc.flink` and
:mod:`flowc.sql` (a step's SQL is parsed while its statement is).
"""
