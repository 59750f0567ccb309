"""Every diagnostic code flowc reports, defined once (cf. mypy's ``errorcodes.py``).

A :class:`Code` is what a :class:`~flowc.diagnostics.Reporter` takes; it is a ``StrEnum``
so that JSON, text and comparisons keep the plain ``E0201``. Each code has a short name,
a one-line summary and the section of the docs that explains it. docs/language.md's
"Diagnostics" table is this registry written out (``python -m flowc.errorcodes
--update-docs`` rewrites it), and tests/test_error_codes.py fails when the two differ,
or when the compiler reports a code that is not here.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

#: The first line of the table in docs/language.md.
_TABLE_HEADER = "| code | name | what | explained in |"


class Code(StrEnum):
    """A diagnostic code; its value is the code as printed (``E0201``)."""

    slug: str
    summary: str
    doc: str

    def __new__(cls, value: str, slug: str, summary: str, doc: str) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.slug = slug
        member.summary = summary
        member.doc = doc
        return member

    @property
    def anchor(self) -> str:
        """Where the code is explained, relative to docs/: ``language.md#settings``."""
        return (
            self.doc if "#" in self.doc or self.doc.endswith(".md") else f"language.md#{self.doc}"
        )

    E0001 = ("E0001", "syntax", "syntax error", "diagnostics")
    E0002 = ("E0002", "missing-semicolon", "a statement without `;` at its end", "diagnostics")
    E0003 = ("E0003", "invalid-sql", "an invalid SQL expression or query", "diagnostics")
    E0004 = (
        "E0004",
        "too-deep",
        "an expression nested too deeply or too long to compile",
        "diagnostics",
    )
    E0101 = ("E0101", "unknown-name", "an unknown source or view", "diagnostics")
    E0102 = ("E0102", "duplicate-name", "a name defined twice", "diagnostics")
    E0103 = (
        "E0103",
        "wrong-kind",
        "a name of the wrong kind (INSERT INTO a source or view)",
        "diagnostics",
    )
    E0104 = ("E0104", "used-before-definition", "a sink used before its definition", "diagnostics")
    E0105 = ("E0105", "cycle", "a view that reads from itself", "diagnostics")
    E0106 = (
        "E0106",
        "unknown-side-output",
        "a side output the source or view does not have",
        "diagnostics",
    )
    E0201 = ("E0201", "unknown-column", "an unknown column", "pipe-steps")
    E0202 = ("E0202", "ambiguous-column", "a column name both sides of a JOIN have", "pipe-steps")
    E0203 = ("E0203", "duplicate-column", "a column declared twice", "statements")
    E0204 = ("E0204", "unknown-type", "an unknown column type", "statements")
    E0205 = (
        "E0205",
        "watermark-type",
        "a WATERMARK on a column that is not a TIMESTAMP",
        "statements",
    )
    E0206 = (
        "E0206",
        "duplicate-output-column",
        "a query that writes two columns with one name",
        "pipe-steps",
    )
    E0207 = ("E0207", "sink-columns", "a query whose columns do not match its sink's", "statements")
    E0208 = ("E0208", "window-without-aggregate", "WINDOW not followed by AGGREGATE", "pipe-steps")
    E0209 = ("E0209", "drop-everything", "DROP that removes every column", "pipe-steps")
    E0210 = (
        "E0210",
        "not-boolean",
        "a WHERE, ON or ROUTE condition that is not BOOLEAN",
        "pipe-steps",
    )
    E0211 = ("E0211", "unnamed-column", "a computed column without a name", "pipe-steps")
    E0212 = (
        "E0212",
        "aggregate-outside-aggregate",
        "an aggregate function outside AGGREGATE",
        "pipe-steps",
    )
    E0213 = ("E0213", "column-exists", "EXTEND adding a column that exists", "pipe-steps")
    E0214 = (
        "E0214",
        "explode-not-array",
        "EXPLODE of something that is not an ARRAY",
        "pipe-steps",
    )
    E0215 = (
        "E0215",
        "expression-key",
        "an AGGREGATE key that is an expression, not a column",
        "pipe-steps",
    )
    E0216 = (
        "E0216",
        "not-an-aggregate",
        "an AGGREGATE value that is not an aggregate",
        "pipe-steps",
    )
    E0217 = (
        "E0217",
        "window-arguments",
        "a WINDOW function with the wrong arguments",
        "pipe-steps",
    )
    E0218 = (
        "E0218",
        "deduplicate-columns",
        "DEDUPLICATE ON an expression, not a column name",
        "pipe-steps",
    )
    E0219 = ("E0219", "join-without-condition", "a JOIN without ON", "pipe-steps")
    E0220 = ("E0220", "self-join-names", "a JOIN whose two sides have one name", "pipe-steps")
    E0221 = (
        "E0221",
        "join-without-equality",
        "a JOIN without an equality between its two sides",
        "pipe-steps",
    )
    E0222 = ("E0222", "union-columns", "UNION ALL inputs with different columns", "pipe-steps")
    E0223 = ("E0223", "duplicate-side-output", "a ROUTE side output defined twice", "pipe-steps")
    E0224 = (
        "E0224",
        "spark-syntax",
        "an expression form Spark's SQL parser does not have (SIMILAR TO)",
        "functions-and-literals",
    )
    E0225 = (
        "E0225",
        "datetime-pattern",
        "a datetime pattern Spark refuses (a letter, a count, a quote or a bracket)",
        "functions-and-literals",
    )
    E0226 = (
        "E0226",
        "pattern-not-literal",
        "a datetime pattern that is not a string literal, so it cannot be checked",
        "functions-and-literals",
    )
    E0227 = (
        "E0227",
        "char-varchar-schema",
        "a CHAR or VARCHAR column in a schema Spark reads records with",
        "functions-and-literals",
    )
    E0228 = (
        "E0228",
        "impossible-cast",
        "a CAST between kinds of type Spark cannot cast (STRING to ARRAY, INT to DATE)",
        "functions-and-literals",
    )
    E0230 = (
        "E0230",
        "unknown-function",
        "a function Spark does not have",
        "functions-and-literals",
    )
    E0231 = (
        "E0231",
        "failing-literal-cast",
        "a string literal Spark's ANSI mode casts and fails on",
        "functions-and-literals",
    )
    E0232 = (
        "E0232",
        "window-function",
        "a window function or an OVER window (streaming queries have neither)",
        "functions-and-literals",
    )
    E0240 = (
        "E0240",
        "distinct-aggregate",
        "a distinct aggregate Spark cannot run on a stream, even rewritten",
        "distinct-aggregates-on-spark",
    )
    E0250 = ("E0250", "recursive-cte", "WITH RECURSIVE", "ctes-and-subqueries")
    E0251 = ("E0251", "duplicate-cte", "a CTE name given twice", "ctes-and-subqueries")
    E0252 = (
        "E0252",
        "system-time-on-stream",
        "FOR SYSTEM_TIME AS OF on a stream, not a table",
        "ctes-and-subqueries",
    )
    E0253 = (
        "E0253",
        "not-top-n",
        "an OVER window in a subquery that is not Flink's Top-N pattern",
        "ctes-and-subqueries",
    )
    E0260 = (
        "E0260",
        "unbounded-table",
        "a CREATE TABLE whose connector is not bounded (tables read files)",
        "tables-and-dimension-joins",
    )
    E0261 = (
        "E0261",
        "table-watermark",
        "a WATERMARK on a table (a table has no event time)",
        "tables-and-dimension-joins",
    )
    E0262 = (
        "E0262",
        "table-stream-option",
        "a stream's option on a table (max_files_per_trigger, latest_first, on_error = 'route')",
        "tables-and-dimension-joins",
    )
    E0263 = (
        "E0263",
        "table-as-stream",
        "a table read as a stream (FROM a table, or a UNION ALL input)",
        "tables-and-dimension-joins",
    )
    E0264 = (
        "E0264",
        "table-outer-join",
        "a RIGHT or FULL JOIN of a table (its unmatched rows are never final)",
        "tables-and-dimension-joins",
    )
    E0265 = (
        "E0265",
        "temporal-join",
        "FOR SYSTEM_TIME AS OF other than the left stream's PROCTIME() column or, on a "
        "versioned table, its event time; or another AS OF form",
        "tables-and-dimension-joins",
    )
    E0266 = (
        "E0266",
        "table-versions",
        "a table's key and version_time options: one without the other, not columns of the "
        "table, or a version time that is not a TIMESTAMP",
        "tables-and-dimension-joins",
    )
    E0267 = (
        "E0267",
        "temporal-join-key",
        "an event-time temporal join whose ON has no equality on a key column of the "
        "versioned table",
        "tables-and-dimension-joins",
    )
    E0268 = (
        "E0268",
        "temporal-join-time",
        "a versioned table joined AS OF processing time (a processing-time temporal join)",
        "tables-and-dimension-joins",
    )
    E0269 = (
        "E0269",
        "table-duplicate-version",
        "a versioned table holds two rows of one key with the same version time (found when "
        "the job starts)",
        "tables-and-dimension-joins",
    )
    E0270 = ("E0270", "top-count", "TOP n with n not a whole number from 1 to 10000", "top-n")
    E0271 = (
        "E0271",
        "top-order",
        "a TOP order by an unorderable value, or in two directions",
        "top-n",
    )
    E0272 = ("E0272", "top-per", "TOP ... PER an expression instead of columns", "top-n")
    E0280 = (
        "E0280",
        "function-declaration",
        "a CREATE FUNCTION Spark cannot register: its name, signature or types",
        "user-defined-functions",
    )
    E0281 = (
        "E0281",
        "function-language",
        "a function in a language other than Python",
        "user-defined-functions",
    )
    E0282 = (
        "E0282",
        "function-not-found",
        "a function's module or attribute that cannot be found",
        "user-defined-functions",
    )
    E0283 = (
        "E0283",
        "function-arity",
        "a call with the wrong number of arguments",
        "user-defined-functions",
    )
    E0284 = (
        "E0284",
        "function-argument-type",
        "an argument whose type the function does not take",
        "user-defined-functions",
    )
    E0285 = (
        "E0285",
        "function-in-outer-join",
        "a Python function in an outer JOIN's ON clause",
        "user-defined-functions",
    )
    E0290 = (
        "E0290",
        "computed-column",
        "a computed column flowc cannot compute: PROCTIME() twice, or on a table; "
        "an aggregate, a column before read ones, or with on_error = route",
        "computed-columns",
    )
    E0291 = (
        "E0291",
        "proctime-watermark",
        "a WATERMARK on the processing-time column",
        "processing-time",
    )
    E0292 = (
        "E0292",
        "metadata-column",
        "a METADATA column (flowc's connectors expose no metadata)",
        "flink-tables",
    )
    E0293 = (
        "E0293",
        "primary-key",
        "a PRIMARY KEY flowc cannot give Flink's meaning: on a stream, a sink that cannot "
        "upsert, an unknown column, a second one, or one that disagrees with key",
        "flink-tables",
    )
    E0294 = (
        "E0294",
        "partitioned-by",
        "a Flink-dialect PARTITIONED BY flowc cannot write: on a table the job reads, a sink "
        "that keeps no partitions, or beside partition_by",
        "flink-tables",
    )
    E0295 = (
        "E0295",
        "table-read-and-written",
        "a Flink-dialect CREATE TABLE that the job both reads and writes",
        "flink-tables",
    )
    E0296 = (
        "E0296",
        "sink-column-cast",
        "a Flink-dialect INSERT whose column of one type Flink does not cast implicitly into "
        "its sink column's type",
        "flink-tables",
    )
    E0298 = (
        "E0298",
        "changes-into-sink",
        "a debezium-json source's changes reach a sink that cannot take them: memory and "
        "console in append mode show each change with its kind; an upsert sink applies them "
        "only keyed by the source's PRIMARY KEY",
        "change-data-capture-input-debezium-json",
    )
    E0299 = (
        "E0299",
        "changes-unsupported",
        "a debezium-json source flowc cannot read as Flink does (an option it does not "
        "take, a table or sink of it), or its changes reaching a step that cannot take them",
        "change-data-capture-input-debezium-json",
    )
    E0301 = ("E0301", "unknown-setting", "an unknown setting", "settings")
    E0302 = ("E0302", "setting-value", "an invalid value for a setting", "settings")
    E0303 = ("E0303", "duplicate-hint", "a hint given twice", "operator-hints")
    E0304 = ("E0304", "hint-value", "an invalid value for a hint", "operator-hints")
    E0305 = (
        "E0305",
        "parallelism-over-max",
        "parallelism larger than max_parallelism",
        "operator-hints",
    )
    E0306 = ("E0306", "hint-on-partition", "a hint on a partition step", "operator-hints")
    E0307 = ("E0307", "duplicate-uid", "a uid used twice", "operator-hints")
    E0308 = (
        "E0308",
        "state-store-setting",
        "state-store settings Spark would not honour (the same choice twice, or a changelog "
        "without RocksDB)",
        "settings",
    )
    E0310 = (
        "E0310",
        "forward-parallelism",
        "FORWARD between different parallelisms (Flink's rule)",
        "semantics-kept-from-flink",
    )
    E0311 = (
        "E0311",
        "global-parallelism",
        "a global aggregation with a parallelism other than 1",
        "semantics-kept-from-flink",
    )
    E0312 = (
        "E0312",
        "unbounded-in-batch",
        "an unbounded source in batch mode (Flink's rule)",
        "semantics-kept-from-flink",
    )
    E0401 = ("E0401", "no-connector", "a source or sink without a connector", "connectors")
    E0402 = (
        "E0402",
        "connector-not-string",
        "a connector name that is not a quoted string",
        "connectors",
    )
    E0403 = ("E0403", "duplicate-option", "a connector option given twice", "connectors")
    E0404 = (
        "E0404",
        "connector-role",
        "a connector used in a role it does not have (a sink-only connector as a source)",
        "connectors",
    )
    E0405 = ("E0405", "option-value", "an invalid value for a connector option", "connectors")
    E0406 = (
        "E0406",
        "missing-option",
        "a connector option that is required and missing",
        "connectors",
    )
    E0407 = ("E0407", "no-columns", "a source that declares no columns", "connectors")
    E0408 = ("E0408", "source-columns", "columns a connector cannot produce", "connectors")
    E0409 = ("E0409", "second-watermark", "a second WATERMARK on one source", "connectors")
    E0410 = (
        "E0410",
        "sink-mode",
        "an output mode the sink does not support",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0411 = (
        "E0411",
        "unknown-set-target",
        "`--set` for a source or sink that does not exist",
        "settings",
    )
    E0412 = (
        "E0412",
        "unread-errors",
        "malformed records routed to an output nothing reads",
        "malformed-records-on_error",
    )
    E0413 = ("E0413", "unprintable-job-name", "a NUL or a lone surrogate in `job.name`", "settings")
    E0420 = (
        "E0420",
        "unknown-partition-column",
        "a sink partitioned by a column its query does not write",
        "partitioned-file-sinks",
    )
    E0421 = (
        "E0421",
        "bad-partition-column",
        "a partition column of a complex type, or every column a partition column",
        "partitioned-file-sinks",
    )
    E0430 = (
        "E0430",
        "upsert-key",
        "an upsert sink without a key, or a key on an append-only sink",
        "upsert-sinks",
    )
    E0431 = (
        "E0431",
        "upsert-key-column",
        "an upsert sink's key column the query does not write",
        "upsert-sinks",
    )
    E0432 = (
        "E0432",
        "upsert-column-type",
        "a column of a type an upsert sink cannot key or store",
        "upsert-sinks",
    )
    E0433 = (
        "E0433",
        "upsert-unsupported",
        "what an upsert sink cannot do: a format, partitions",
        "upsert-sinks",
    )
    E0501 = ("E0501", "no-insert", "a program without INSERT INTO", "statements")
    E0601 = (
        "E0601",
        "unsupported-sql",
        "SQL the streaming lowering does not support",
        "sql-select-queries",
    )
    E0602 = (
        "E0602",
        "flink-group-window",
        "Flink SQL's group windows, their properties and window table functions",
        "flink-sql-and-flink-ddl",
    )
    E0603 = (
        "E0603",
        "flink-window-property",
        "a Flink window property (TUMBLE_START, ...) that is not its GROUP BY window's",
        "flink-sql-and-flink-ddl",
    )
    E0604 = (
        "E0604",
        "flink-window-tvf-use",
        "a Flink window table function used other than as a window aggregation",
        "flink-sql-and-flink-ddl",
    )
    E0605 = (
        "E0605",
        "flink-window-arguments",
        "a Flink group window or window table function with the wrong arguments",
        "flink-sql-and-flink-ddl",
    )
    E0610 = (
        "E0610",
        "flink-current-watermark",
        "Flink's CURRENT_WATERMARK outside a WHERE, or of a column that is not a "
        "watermarked time attribute",
        "current_watermark-on-spark",
    )
    E0741 = (
        "E0741",
        "updating-aggregate-call",
        "an AGGREGATE over an updating input (a TOP's or an AGGREGATE's rows), or whose "
        "updates a later step consumes, with a call its processor does not compute: only "
        "count, sum, avg (not of a DECIMAL), min and max of a column, without DISTINCT",
        "updating-pipelines-on-spark",
    )
    E0742 = (
        "E0742",
        "updating-sink-key",
        "an updating pipeline written to an upsert sink whose key is not its last step's "
        "upsert key (an AGGREGATE's group keys; a TOP's PER columns and rank, or without "
        "the rank the updating AGGREGATE's keys, or a CDC source's PRIMARY KEY; a JOIN "
        "over changes: one column of each ON equality, the preserved side's for an outer "
        "JOIN, both for FULL): its deletes and updates would not find their rows",
        "updating-pipelines-on-spark",
    )
    E0743 = (
        "E0743",
        "updating-sink-kind",
        "an updating pipeline (a step consuming a TOP's or an AGGREGATE's updates, or a CDC "
        "source's) written to a sink that is not an upsert sink (files in update mode, "
        "postgres)",
        "updating-pipelines-on-spark",
    )
    E0744 = (
        "E0744",
        "updating-state-store",
        "an updating pipeline, whose steps run as stateful processors, in a job that sets a "
        "state store other than RocksDB (the only one Spark runs a processor on)",
        "updating-pipelines-on-spark",
    )
    E0611 = (
        "E0611",
        "flink-similar-to",
        "a SIMILAR TO (Flink dialect) flowc does not translate to Spark's RLIKE",
        "functions-whose-meaning-differs",
    )
    E0612 = (
        "E0612",
        "flink-date-format",
        "a DATE_FORMAT pattern letter Flink and Spark read differently (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0613 = (
        "E0613",
        "flink-regexp-group",
        "a REGEXP_EXTRACT group Flink may give NULL for where Spark gives '' or fails",
        "functions-whose-meaning-differs",
    )
    E0614 = (
        "E0614",
        "flink-to-timestamp",
        "a TO_TIMESTAMP format flowc does not read as Flink does (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0615 = (
        "E0615",
        "flink-unix-timestamp",
        "UNIX_TIMESTAMP of a string, which Flink parses leniently (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0616 = (
        "E0616",
        "flink-convert-tz",
        "a CONVERT_TZ flowc cannot give Flink's string for (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0617 = (
        "E0617",
        "flink-window-proctime",
        "TUMBLE_PROCTIME (HOP_, SESSION_) of a window over event time (Flink dialect)",
        "flink-sql-and-flink-ddl",
    )
    E0619 = (
        "E0619",
        "flink-aggregate-type",
        "an aggregate whose Flink value flowc cannot give for its argument (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0738 = (
        "E0738",
        "flink-split-index",
        "a SPLIT_INDEX whose separator is not a non-empty string literal (Flink dialect)",
        "functions-whose-meaning-differs",
    )
    E0739 = (
        "E0739",
        "flink-hint",
        "a Flink hint (/*+ OPTIONS(...) */, /*+ BROADCAST(...) */, ...) flowc does not "
        "apply (Flink dialect)",
        "flink-tables",
    )
    E0740 = (
        "E0740",
        "watermark-reader-on-spark",
        "a step reading CURRENT_WATERMARK where Spark cannot give Flink's value or run its "
        "processor (a query not in append mode, after a stream-stream JOIN or of two "
        "watermarked sources, a state store other than RocksDB)",
        "current_watermark-on-spark",
    )
    E0701 = (
        "E0701",
        "complete-without-aggregation",
        "complete mode without an aggregation",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0702 = (
        "E0702",
        "stateful-after-aggregation",
        "a stateful step after an aggregation outside append mode",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0703 = (
        "E0703",
        "session-update",
        "a SESSION window in update mode",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0704 = (
        "E0704",
        "aggregate-append",
        "an AGGREGATE without WINDOW in append mode",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0705 = (
        "E0705",
        "window-append-watermark",
        "a WINDOW in append mode without a WATERMARK on its time column",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0706 = (
        "E0706",
        "outer-join-bounds",
        "an outer stream-stream JOIN without watermarks on both sides and a time bound",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0707 = (
        "E0707",
        "deduplicate-within-watermark",
        "DEDUPLICATE ... WITHIN without a WATERMARK",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0708 = (
        "E0708",
        "deduplicate-within-on-spark",
        "DEDUPLICATE ... WITHIN whose processor has no one event time, interval or store",
        "deduplicate-within-on-spark",
    )
    E0709 = (
        "E0709",
        "top-into-upsert",
        "a TOP whose rows reach an upsert sink through a step that may hide a group from a "
        "micro-batch or lose a group column: rows leaving the top could not be deleted",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0720 = (
        "E0720",
        "not-spark-sql",
        "an expression the Spark backend cannot write as Spark SQL",
        "running-on-spark",
    )
    E0724 = (
        "E0724",
        "watermark-form",
        "a WATERMARK other than `column - INTERVAL ...`",
        "running-on-spark",
    )
    E0725 = (
        "E0725",
        "datagen-type",
        "a datagen column type the Spark backend cannot generate",
        "running-on-spark",
    )
    E0726 = (
        "E0726",
        "sink-written-twice",
        "two INSERTs into one sink, which Spark would run as two queries sharing its name, "
        "checkpoint and output",
        "running-on-spark",
    )
    E0730 = (
        "E0730",
        "window-time-outside-window",
        "`window_time` in an AGGREGATE without WINDOW, or `window_time(w)` of no grouped window",
        "cascading-windows-window_end-and-window_time-keep-the-watermark",
    )
    E0731 = (
        "E0731",
        "window-time-alone",
        "a windowed AGGREGATE of `window_time` and no aggregate, or `window_time` given twice",
        "cascading-windows-window_end-and-window_time-keep-the-watermark",
    )
    E0732 = (
        "E0732",
        "window-time-in-expression",
        "SQL's `window_time(w)` inside an expression rather than an item of its own",
        "cascading-windows-window_end-and-window_time-keep-the-watermark",
    )
    E0733 = (
        "E0733",
        "window-time-watermark",
        "a stateful step other than a window over it keyed, deduplicated or joined on "
        "`window_time`, whose rows Spark can drop as late",
        "cascading-windows-window_end-and-window_time-keep-the-watermark",
    )
    E0734 = (
        "E0734",
        "flink-session-tvf-top-n",
        "a window Top-N over Flink's SESSION window table function",
        "flink-sql-and-flink-ddl",
    )
    E0735 = (
        "E0735",
        "flink-session-tvf-keys",
        "Flink's SESSION window table function grouped by other columns than its PARTITION BY",
        "flink-sql-and-flink-ddl",
    )
    E0736 = (
        "E0736",
        "cumulate-top",
        "TOP over a CUMULATE window",
        "pipe-steps",
    )
    E0737 = (
        "E0737",
        "cumulate-sizes",
        "a CUMULATE window whose size is not a whole multiple of its step",
        "pipe-steps",
    )
    E0745 = (
        "E0745",
        "changelog-window-top",
        "a WINDOW ... TOP over updates (Flink's WindowRank takes inserts only)",
        "changelog-modes",
    )
    E0746 = (
        "E0746",
        "changelog-interval-join",
        "a JOIN bounding an event time (Flink's IntervalJoin) over updates",
        "changelog-modes",
    )
    E0747 = (
        "E0747",
        "changelog-over",
        "an OVER aggregate over updates (Flink's OverAggregate takes inserts only)",
        "changelog-modes",
    )
    E0748 = (
        "E0748",
        "changelog-append-sink",
        "an append-only sink (files in append mode, kafka) given updates",
        "changelog-modes",
    )
    E0750 = (
        "E0750",
        "over-descending",
        "an OVER window ordered descending (Flink orders one ascending)",
        "over-windows",
    )
    E0751 = (
        "E0751",
        "over-order",
        "an OVER window not ordered by exactly one time column",
        "over-windows",
    )
    E0752 = (
        "E0752",
        "over-following",
        "an OVER window whose frame reaches FOLLOWING rows, or LEAD (Flink refuses both "
        "on a stream)",
        "over-windows",
    )
    E0753 = (
        "E0753",
        "over-on-spark",
        "an OVER window Flink runs on a stream that flowc does not run on Spark yet",
        "over-windows",
    )
    E0754 = (
        "E0754",
        "over-windows-differ",
        "OVER calls of one SELECT over different windows (Flink plans one window per "
        "SELECT on a stream)",
        "over-windows",
    )
    E0755 = (
        "E0755",
        "over-lag-frame",
        "LAG with a frame (ROWS or RANGE): Flink refuses one, LAG's frame is its own",
        "over-windows",
    )
    E0756 = (
        "E0756",
        "over-lag-default",
        "a LAG default Flink refuses: NULL, or a literal of another type than its column's "
        "(Flink dialect)",
        "over-windows",
    )
    E0758 = (
        "E0758",
        "lateral-top-n",
        "a LATERAL subquery that is not Flink's LATERAL Top-N per group (Flink 2.3 "
        "refuses it on a stream)",
        "ctes-and-subqueries",
    )
    E0759 = (
        "E0759",
        "match-recognize",
        "MATCH_RECOGNIZE outside the subset flowc runs (Flink's pattern recognition)",
        "match_recognize",
    )
    E0760 = (
        "E0760",
        "join-bound-other-time",
        "a stream-stream JOIN bounding the other side's time by a TIMESTAMP column that "
        "carries no watermark (e.g. `b.t <= a.expires`) where flowc cannot test the bound "
        "after Spark's join (an outer JOIN, or a bound inside another condition): Spark "
        "would evict rows by their watermark column too early",
        "tables-and-dimension-joins",
    )
    E0761 = (
        "E0761",
        "filter-after-aggregate-into-upsert",
        "a WHERE (or HAVING) between an AGGREGATE (windowed too) and an upsert sink that "
        "cannot run as a mark (in a view, a sink keyed otherwise, a key column renamed): a "
        "key whose new row fails the filter would keep its old row on Spark",
        "sparks-streaming-rules-checked-at-compile-time",
    )
    E0801 = (
        "E0801",
        "malformed-record",
        "(at run time) a malformed record in a file source with `on_error = 'fail'`",
        "when-a-query-fails",
    )
    E0802 = (
        "E0802",
        "expression-failed",
        "(at run time) an expression failed on a row",
        "when-a-query-fails",
    )
    E0803 = (
        "E0803",
        "checkpoint-incompatible",
        "(at run time) a checkpoint the query cannot use",
        "when-a-query-fails",
    )
    E0804 = (
        "E0804",
        "spark-failed",
        "(at run time) any other failure of Spark",
        "when-a-query-fails",
    )
    E0805 = (
        "E0805",
        "function-failed",
        "(at run time) a user-defined function raised or returned a wrong value",
        "user-defined-functions",
    )
    E0806 = (
        "E0806",
        "sink-failed",
        "(at run time) an upsert sink could not write a micro-batch",
        "upsert-sinks",
    )
    E0807 = (
        "E0807",
        "jvm-ended",
        "(at run time) Spark's JVM ended while the job ran (a stack overflow, out of memory)",
        "when-a-query-fails",
    )
    E0810 = (
        "E0810",
        "folder-other-checkpoint",
        "a file sink's folder whose commit log another checkpoint wrote",
        "who-owns-a-sinks-folder",
    )
    E0811 = (
        "E0811",
        "folder-ahead",
        "a file sink's folder whose commit log goes further than the checkpoint",
        "who-owns-a-sinks-folder",
    )
    E0812 = (
        "E0812",
        "folder-foreign",
        "a file sink's folder with a commit log no checkpoint of this job wrote",
        "who-owns-a-sinks-folder",
    )
    E0813 = (
        "E0813",
        "folder-unwritable",
        "a file sink's folder that cannot be made or written",
        "who-owns-a-sinks-folder",
    )
    E0814 = (
        "E0814",
        "checkpoint-unwritable",
        "a checkpoint folder that cannot be made or written",
        "who-owns-a-sinks-folder",
    )
    E0815 = (
        "E0815",
        "shared-folder",
        "two file sinks writing one folder",
        "who-owns-a-sinks-folder",
    )
    E0816 = (
        "E0816",
        "processor-packages-missing",
        "a job with a Spark stateful processor (CURRENT_WATERMARK) run where Python lacks "
        "pandas, pyarrow or protobuf",
        "current_watermark-on-spark",
    )
    E0817 = (
        "E0817",
        "spark-missing",
        "flowc run, rescale or test where Python has no pyspark (the compiler alone is installed)",
        "install.md",
    )
    E0820 = (
        "E0820",
        "state-incompatible",
        "an edit the state in the checkpoint cannot survive",
        "state.md",
    )
    E0821 = (
        "E0821",
        "state-rescaled",
        "an edit that rescales the state: a new parallelism or number of shuffle partitions "
        "(flowc run repartitions the state first), a new max_parallelism (Spark ignores it)",
        "state.md",
    )
    E0822 = ("E0822", "state-unreadable", "a checkpoint whose state flowc cannot read", "state.md")
    E0823 = (
        "E0823",
        "reset-state-failed",
        "`--reset-state` that cannot move the state aside",
        "state.md",
    )
    E0824 = (
        "E0824",
        "state-store-frozen",
        "a state store other than the one the checkpoint froze",
        "state.md",
    )
    E0825 = (
        "E0825",
        "state-kept-output-changes",
        "an edit the state survives, but that changes what the job reads or writes from now on",
        "state.md",
    )
    E0826 = (
        "E0826",
        "state-not-rescalable",
        "a new parallelism for a checkpoint whose state flowc cannot repartition (the "
        "HDFS-backed store, a Spark older than 4.2, an operator not handled, a batch that "
        "did not commit)",
        "state.md",
    )
    E0830 = (
        "E0830",
        "test-file",
        "a `flowc test` file that cannot run: bad YAML, an unknown source, sink or column",
        "testing.md",
    )
    E0831 = (
        "E0831",
        "test-file-too-large",
        "a `flowc test` file past flowc's bound on its bytes",
        "limits.md",
    )
    E0832 = (
        "E0832",
        "test-file-tag",
        "a YAML tag in a `flowc test` file other than the core ones (`!!python/...`, `!!set`)",
        "limits.md",
    )
    E0833 = (
        "E0833",
        "test-file-aliases",
        "a `flowc test` file whose values, aliases expanded, pass flowc's bound",
        "limits.md",
    )
    E0834 = (
        "E0834",
        "test-file-cycle",
        "a YAML alias inside its own anchor in a `flowc test` file",
        "limits.md",
    )
    E0835 = (
        "E0835",
        "test-file-too-deep",
        "YAML lists and mappings nested past flowc's bound in a `flowc test` file",
        "limits.md",
    )
    E0901 = ("E0901", "source-too-long", "a program text past flowc's bound", "limits.md")
    E0902 = ("E0902", "literal-too-long", "a literal or comment past flowc's bound", "limits.md")
    E0903 = (
        "E0903",
        "plan-too-large",
        "a plan past one of flowc's bounds (operators, chains, key groups)",
        "limits.md",
    )
    E0904 = (
        "E0904",
        "lone-surrogate",
        "a source text holding a lone UTF-16 surrogate, which no file can hold",
        "limits.md",
    )
    E0950 = ("E0950", "subquery", "a query inside an expression", "security.md")
    E0951 = (
        "E0951",
        "untrusted-setting",
        "(untrusted programs) a setting outside the allow-list",
        "security.md",
    )
    E0952 = (
        "E0952",
        "untrusted-function",
        "(untrusted programs) a function or command outside the allow-list",
        "security.md",
    )
    E0953 = (
        "E0953",
        "untrusted-path",
        "(untrusted programs) a path outside the allowed folder",
        "security.md",
    )
    E0954 = (
        "E0954",
        "untrusted-scheme",
        "(untrusted programs) a URI scheme outside the allow-list",
        "security.md",
    )
    E0955 = (
        "E0955",
        "untrusted-option",
        "(untrusted programs) a connector option outside the allow-list",
        "security.md",
    )
    E0956 = (
        "E0956",
        "untrusted-python-function",
        "(untrusted programs) a Python function the embedding did not allow",
        "security.md",
    )
    E0957 = (
        "E0957",
        "untrusted-database",
        "(untrusted programs) a sink that connects to a database server",
        "security.md",
    )
    E0958 = (
        "E0958",
        "variable-substitution",
        "'${' in text handed to Spark, or Spark's variable substitution turned on",
        "security.md",
    )
    E0959 = (
        "E0959",
        "check-not-finished",
        "(untrusted programs) a check that could not finish: refused, not allowed",
        "security.md",
    )
    E0960 = (
        "E0960",
        "untrusted-module-link",
        "(untrusted programs) a Python module file that leads out of the base directory",
        "security.md",
    )
    E0961 = (
        "E0961",
        "untrusted-regex",
        "(untrusted programs) a regular expression that is not a literal, or that repeats a group "
        "or refers back to one",
        "security.md",
    )
    E0990 = (
        "E0990",
        "internal-error",
        "flowc crashed analysing a document in `flowc lsp` (a bug in flowc: report it)",
        "editors.md#when-analysis-fails",
    )
    E0991 = (
        "E0991",
        "analysis-timeout",
        "`flowc lsp`'s analysis of a document took longer than its time budget",
        "editors.md#when-analysis-fails",
    )
    W0001 = (
        "W0001",
        "stateful-without-max-parallelism",
        "a stateful step without max_parallelism",
        "semantics-kept-from-flink",
    )
    W0003 = ("W0003", "set-twice", "a setting set twice", "settings")
    W0004 = ("W0004", "unused", "a source, view or sink never used", "diagnostics")
    W0005 = (
        "W0005",
        "unreadable-side-output",
        "a ROUTE whose side outputs cannot be read",
        "pipe-steps",
    )
    W0040 = (
        "W0040",
        "unbounded-join-state",
        "a stream-stream JOIN whose state grows forever (no watermarks and time bound, or "
        "a JOIN over a CDC source's changes)",
        "tables-and-dimension-joins",
    )
    W0041 = (
        "W0041",
        "watermark-read-per-query",
        "two queries reading CURRENT_WATERMARK, each by its own micro-batches",
        "current_watermark-on-spark",
    )
    W0020 = (
        "W0020",
        "missing-path",
        "a `files` source whose path does not exist (an error in `flowc run`)",
        "connectors",
    )


def markdown_table() -> str:
    """docs/language.md's table of codes: one row a code, linked to where it is explained."""
    rows = [_TABLE_HEADER, "|---|---|---|---|"]
    for code in Code:
        target = code.anchor.removeprefix("language.md")
        rows.append(
            f"| {code.value} | `{code.slug}` | {code.summary} | [{code.anchor}]({target}) |"
        )
    return "\n".join(rows) + "\n"


def update_docs(path: Path) -> bool:
    """Rewrite the table in ``path`` (docs/language.md) from this registry; True if it changed."""
    text = path.read_text(encoding="utf-8")
    start = text.index(_TABLE_HEADER)
    end = text.find("\n\n", start)
    end = len(text) if end == -1 else end + 1
    updated = text[:start] + markdown_table() + text[end:]
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return updated != text


if __name__ == "__main__":
    if sys.argv[1:] == ["--update-docs"]:
        docs = Path(__file__).resolve().parent.parent / "docs" / "language.md"
        print(f"{docs}: {'updated' if update_docs(docs) else 'already up to date'}")
    else:
        print(markdown_table(), end="")
