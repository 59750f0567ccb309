"""Flink SQL as a sqlglot dialect: ``SET sql.dialect = 'flink';`` reads the statements after
it as Flink 2.x writes them (docs/language.md, "Flink SQL").

sqlglot has no Flink dialect. Flink's SQL (Calcite's parser with Flink's lexical rules) is
close to Spark's: backquoted identifiers, single-quoted strings, the same INTERVAL forms;
so the dialect extends flowc's reading of Spark's (:mod:`flowc.sql.spark_patterns`) where
they differ. The trees it makes are sqlglot's, written as Spark SQL like any other (so a
string read here is written again as Spark reads it), and what the same function name
computes differently in Flink is rewritten before typing, so the program means what it
means on Flink.

Lexical differences kept here: a backslash in a string is a backslash (Flink has no
backslash escapes; ``''`` is a quote in both).
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot.dialects.spark import Spark

from flowc.sql.spark_patterns import SparkParser, SparkTokenizer

#: The name ``sql.dialect`` takes (sqlglot registers a dialect by its class's name).
FLINK = "flink"


class Flink(Spark):
    """Flink SQL, read into sqlglot's trees (registered as ``flink``)."""

    #: ``a / b`` of two exact integers is integer division (truncating, of their wider
    #: type): the parser marks each division ``typed``, the Spark generator writes it
    #: as Spark's ``div`` where both operands are typed as integers.
    TYPED_DIVISION = True
    #: ``REGEXP_EXTRACT(s, re)`` is group 0, the whole match (Spark's default is 1).
    REGEXP_EXTRACT_DEFAULT_GROUP = 0

    class Tokenizer(SparkTokenizer):
        #: Flink reads ``'a\\b'`` as the three characters ``a\\b``; only ``''`` escapes.
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]

    class Parser(SparkParser):
        pass
