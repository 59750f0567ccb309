"""Fuzzing inputs and harness, shared by tests/test_fuzz.py and benchmarks/soak.py.

Every random decision goes through a :class:`Chooser`: :class:`RandomChooser` (a seeded
``random.Random``, fast and deterministic per seed: the soak) or :class:`DrawChooser`
(hypothesis's ``draw``, which shrinks a failing case: the tests). So both fuzz the same
inputs:

- :func:`generate_program`: programs from the grammar — sources of every connector with
  random schemas, watermarks and hints; views and INSERTs of random pipe steps (every step
  kind), partition steps, SQL ``SELECT`` queries, hints, settings, parallelism, hostile
  names. Mostly valid: the generator tracks each relation's columns so that steps refer
  to columns that exist; now and then it breaks a rule on purpose.
- :func:`mutate_tokens` and :func:`mutate_bytes`: an example mutated at token level
  (delete, insert, swap, duplicate, replace, a character inserted) or at byte level
  (delete, insert, swap, duplicate, flip a bit, truncate).

:func:`run_passes` takes one input through every pass and every ``--emit`` stage and
format in-process, :func:`run_cli` through ``flowc.cli.main.main`` in-process (``check``,
``check --format json``, ``compile --emit all``, ``compile --emit pyspark``), and
:func:`run_cli_subprocess` through real ``python -m flowc`` processes.
"""

from __future__ import annotations

import ast as pyast
import contextlib
import io
import json
import logging
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import flowc
from flowc.cli.compile import render_stage as _render_stage
from flowc.cli.main import STAGE_FORMATS, NotRunnable, main
from flowc.diagnostics import Severity, render_json, render_text

T = TypeVar("T")

# flowc reports sqlglot's problems as diagnostics; its log lines would only repeat them
# (the CLI silences them the same way).
logging.getLogger("sqlglot").setLevel(logging.CRITICAL)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PATHS = sorted((ROOT / "examples").glob("*.flow")) + sorted(
    (ROOT / "examples" / "errors").glob("*.flow")
)
EXAMPLES = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in EXAMPLE_PATHS}

# ----------------------------------------------------------------------------- choosers


class Chooser:
    """The source of every random decision; subclasses give :meth:`integer`."""

    def integer(self, low: int, high: int) -> int:
        raise NotImplementedError

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(1, 100) <= percent

    def subset(self, options: Sequence[T], low: int = 1) -> list[T]:
        """A non-empty (at least ``low``) ordered selection, without repeats."""
        pool = list(options)
        count = self.integer(min(low, len(pool)), len(pool))
        return [pool.pop(self.integer(0, len(pool) - 1)) for _ in range(count)]


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


class DrawChooser(Chooser):
    """Decisions drawn by hypothesis, so failing cases shrink."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        from hypothesis import strategies as st

        self.draw = draw
        self.integers = st.integers

    def integer(self, low: int, high: int) -> int:
        value: int = self.draw(self.integers(low, high))
        return value


# ----------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Col:
    name: str  # as the compiler sees it
    type: str | None  # the Spark SQL type, None when the generator does not know it
    kind: str  # num, str, bool, time, date, array, other

    @property
    def ref(self) -> str:
        """The column as written in a program (quoted if it must be)."""
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name) and self.name.lower() not in {
            "window",
            "select",
            "from",
            "end",
            "case",
        }:
            return self.name
        return "`" + self.name.replace("`", "``") + "`"


COLUMNS = [
    Col("k", "BIGINT", "num"),
    Col("v", "DOUBLE", "num"),
    Col("n", "INT", "num"),
    Col("amount", "DECIMAL(12,2)", "num"),
    Col("name", "STRING", "str"),
    Col("ts", "TIMESTAMP", "time"),
    Col("day", "DATE", "date"),
    Col("ok", "BOOLEAN", "bool"),
    Col("tags", "ARRAY<STRING>", "array"),
    Col("key", "BIGINT", "num"),  # a keyword of the language, usable as a column
    Col("odd name", "STRING", "str"),
    Col("sel`ect", "BIGINT", "num"),
    Col("ключ", "BIGINT", "num"),
    Col("window", "STRING", "str"),
    Col('say "hi"', "DOUBLE", "num"),
    Col("back\\slash", "STRING", "str"),
    Col('"""', "BIGINT", "num"),
]
#: Names for sources, views and sinks now and then: spaces, quotes, backslashes, non-ASCII.
HOSTILE_NAMES = ["sou rce", "it's", 'tri"""ple', "back\\slash", "流", "select", "a`b", "x.y"]
TYPE_SPELLINGS = {
    "BIGINT": ["BIGINT", "long", "bigint"],
    "DOUBLE": ["DOUBLE", "double"],
    "INT": ["INT", "integer"],
    "DECIMAL(12,2)": ["DECIMAL(12, 2)"],
    "STRING": ["STRING", "string"],
    "TIMESTAMP": ["TIMESTAMP"],
    "DATE": ["DATE"],
    "BOOLEAN": ["BOOLEAN", "boolean"],
    "ARRAY<STRING>": ["ARRAY<STRING>", "array<string>"],
}
HOSTILE_TEXT = [
    "it''s",
    '"double"',
    "back\\\\slash",
    "new\\nline",
    "tab\\there",
    "ünïcödé ✓ 流",
    "{braces} %s %d",
    "<b>&amp;</b>",
    "-- not a comment",
    "/* nor this */",
    "a|b;c",
    "\\u0000nul",
    "'''' \"\"\"",
    "x" * 120,
    " ",
    "",
]
CONDITIONS = {
    "num": [
        "{c} > {i}",
        "{c} % 3 = 0",
        "{c} IS NOT NULL",
        "{c} BETWEEN 1 AND {i}",
        "abs({c}) >= 0",
    ],
    "str": ["{c} <> ''", "length({c}) > {i}", "{c} LIKE 'a%'", "{c} IN ('a', 'b')"],
    "bool": ["{c}", "NOT {c}", "{c} = true"],
    "time": ["{c} IS NOT NULL", "{c} > TIMESTAMP '2024-01-01 00:00:00'", "hour({c}) < 12"],
    "date": ["{c} IS NOT NULL", "{c} >= DATE '2024-01-01'"],
    "array": ["size({c}) > 0", "array_contains({c}, 'x')"],
    "other": ["{c} IS NOT NULL"],
}
COMPUTED: dict[str, list[tuple[str, str, str | None]]] = {  # (expression, kind, type)
    "num": [
        ("{c} + 1", "num", None),
        ("{c} * 2", "num", None),
        ("CAST({c} AS STRING)", "str", "STRING"),
        ("CASE WHEN {c} > 0 THEN 1 ELSE 0 END", "num", "INT"),
        ("coalesce({c}, 0)", "num", None),
    ],
    "str": [
        ("upper({c})", "str", "STRING"),
        ("concat({c}, '!')", "str", "STRING"),
        ("substr({c}, 1, 2)", "str", "STRING"),
        ("split({c}, ',')", "array", "ARRAY<STRING>"),
        ("length({c})", "num", "INT"),
    ],
    "bool": [("NOT {c}", "bool", "BOOLEAN"), ("CAST({c} AS INT)", "num", "INT")],
    "time": [
        ("{c} + INTERVAL 1 HOUR", "time", "TIMESTAMP"),
        ("to_date({c})", "date", "DATE"),
        ("hour({c})", "num", "INT"),
    ],
    "date": [("year({c})", "num", "INT"), ("date_add({c}, 1)", "date", "DATE")],
    "array": [("size({c})", "num", "INT"), ("{c}[0]", "str", "STRING")],
    "other": [("{c}", "other", None)],
}
INTERVALS = ["INTERVAL 1 MINUTE", "INTERVAL 10 SECONDS", "'1 hour'", "INTERVAL 5 SECOND"]
PARTITION_STEPS = ["REBALANCE", "RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD"]


@dataclass
class Relation:
    """What the generator knows of a source, view or side output."""

    name: str  # as written in FROM (quoted if need be, `view.branch` for side outputs)
    qualifier: str  # the name columns are qualified with
    columns: list[Col]
    watermarks: set[str] = field(default_factory=set)
    bounded: bool = False
    plain_aggregates: int = 0  # (views) AGGREGATEs without WINDOW upstream
    windows: int = 0
    stateful: int = 0  # stateful steps upstream


@dataclass
class _Query:
    relation: Relation  # the query's FROM
    columns: list[Col]
    watermarks: set[str]
    keys: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    plain_aggregates: int = 0
    windows: int = 0
    stateful: int = 0
    routes: list[tuple[list[str], list[Col], set[str]]] = field(default_factory=list)
    sides: set[str] = field(default_factory=set)  # names a JOIN's right side must not have


def _quote(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return "`" + name.replace("`", "``") + "`"


class ProgramGenerator:
    """One program per instance: ``ProgramGenerator(chooser).program()``."""

    def __init__(self, chooser: Chooser) -> None:
        self.c = chooser
        self.counter = 0
        self.relations: list[Relation] = []
        self.lines: list[str] = []
        self.parallelism = 1
        self.max_parallelism: int | None = None
        self.batch = False
        self.unread: list[Relation] = []  # side outputs of malformed records

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def name(self, prefix: str) -> str:
        """A fresh name for a source, view or sink; one in ten is hostile."""
        return self.fresh(prefix if self.c.chance(90) else self.c.choice(HOSTILE_NAMES))

    # ------------------------------------------------------------ hints and settings

    def parallelism_value(self) -> int:
        c = self.c
        if c.chance(2):
            return c.choice([0, -1, 32769, 1000, 2048])  # out of range, or large
        if c.chance(5):
            return c.integer(9, 300)
        return c.integer(1, 8)

    def hints(self, *, single: bool = False) -> list[str]:
        """``key = value`` hint texts; mostly none, now and then a broken one.

        ``single``: the operator runs with parallelism 1 (a global aggregate).
        """
        c = self.c
        out: list[str] = []
        if c.chance(55):
            return out
        p = self.parallelism
        if c.chance(40):
            p = 1 if single and c.chance(97) else self.parallelism_value()
            if self.max_parallelism is not None and p > self.max_parallelism and c.chance(97):
                p = self.max_parallelism
            out.append(f"parallelism = {p}")
        if c.chance(15):
            options = [m for m in (8, 128, 256, 4096, 32768) if m >= p or c.chance(2)]
            out.append(f"max_parallelism = {c.choice(options or [32768])}")
        if c.chance(25):
            uid = self.fresh("uid-") if c.chance(99) else "uid-1"
            out.append(f"uid = '{uid}'")
        if c.chance(20):
            out.append(f"name = '{c.choice(HOSTILE_TEXT) if c.chance(50) else self.fresh('op ')}'")
        if c.chance(15):
            group = c.choice(["a", "b", "default", "sl''ot"])
            out.append(f"slot_sharing_group = '{group}'")
        if c.chance(15):
            out.append(f"chaining = '{c.choice(['always', 'new_chain', 'never'])}'")
        if c.chance(1):
            out.append(c.choice(["nonsense = 1", "chaining = 'sometimes'", "parallelism = 'x'"]))
        if c.chance(1) and out:
            out.append(out[0])  # the same hint twice
        return out

    def with_hints(self, *, single: bool = False) -> str:
        hints = self.hints(single=single)
        return f" WITH ({', '.join(hints)})" if hints else ""

    def settings(self) -> None:
        c = self.c
        self.parallelism = self.parallelism_value() if c.chance(80) else 1
        if c.chance(90):
            self.lines.append(f"SET parallelism = {self.parallelism};")
        elif self.parallelism < 1 or self.parallelism > 32768:
            self.parallelism = 1
        if c.chance(50):
            options = [128, 256, 32768, 16, 4]
            self.max_parallelism = c.choice(options)
            if self.max_parallelism < self.parallelism and c.chance(97):
                self.max_parallelism = 128 if self.parallelism <= 128 else 32768
            self.lines.append(f"SET max_parallelism = {self.max_parallelism};")
        if c.chance(15):
            self.lines.append(f"SET chaining = {c.choice(['false', 'true'] * 20 + ['maybe'])};")
        if c.chance(10):
            self.batch = True
            self.lines.append("SET execution.mode = batch;")
        if c.chance(15):
            interval = c.choice(["10s", "500ms", "1min", "'10 seconds'", "2h"] * 5 + ["5ms"])
            self.lines.append(f"SET checkpoint.interval = {interval};")
        if c.chance(10):
            self.lines.append(
                f"SET checkpoint.mode = {c.choice(['exactly_once', 'at_least_once'])};"
            )
        if c.chance(10):
            self.lines.append(f"SET job.name = '{c.choice(HOSTILE_TEXT) or 'j'}';")
        if c.chance(10):
            self.lines.append(f"SET spark.sql.shuffle.partitions = {c.integer(1, 8)};")
        if c.chance(3):
            self.lines.append(f"SET parallelism = {c.integer(1, 4)};")  # twice: W0003

    # ------------------------------------------------------------ sources and sinks

    def source(self) -> None:
        c = self.c
        name = self.name("src")
        connectors = ["datagen", "datagen", "files", "files", "rate", "socket", "kafka"]
        if self.batch and c.chance(95):
            connectors = ["datagen", "files"]
        connector = c.choice(connectors)
        options = [f"connector = '{connector}'"]
        bounded = False
        on_error = None
        if connector == "rate":
            columns = c.subset(
                [Col("timestamp", "TIMESTAMP", "time"), Col("value", "BIGINT", "num")]
            )
            if c.chance(30):
                options.append(f"rows_per_second = {c.integer(1, 100)}")
        elif connector == "socket":
            columns = [Col(c.choice(["line", "value"]), "STRING", "str")]
            options += ["host = 'localhost'", f"port = {c.integer(1, 65535)}"]
            if c.chance(40):
                options.append("include_timestamp = true")
                columns.append(Col("timestamp", "TIMESTAMP", "time"))
        else:
            columns = c.subset(COLUMNS[:9] if c.chance(85) else COLUMNS)
            fmt = c.choice(["json", "json", "csv", "parquet", "text", "orc"])
            if (connector == "datagen" or fmt == "csv") and c.chance(97):
                columns = [col for col in columns if col.kind != "array"] or [COLUMNS[0]]
            if connector == "files":
                bounded = True
                if fmt == "text":
                    columns = [Col("line", "STRING", "str")]
                path = c.choice(["in", "data/in", "../x y", "it''s"])
                options += [f"path = '{path}'", f"format = '{fmt}'"]
                if fmt == "csv" and c.chance(50):
                    options.append("header = true")
                if (fmt in ("json", "csv") and c.chance(30)) or c.chance(1):
                    on_error = c.choice(["route", "route", "fail"])
                    options.append(f"on_error = '{on_error}'")
            elif connector == "kafka":
                options += ["topic = 't'", "bootstrap_servers = 'localhost:9092'"]
                if c.chance(70):
                    options.append("format = 'json'")
                else:
                    columns = [Col("key", "BINARY", "other"), Col("value", "STRING", "str")]
                    if c.chance(50):
                        columns.append(Col("timestamp", "TIMESTAMP", "time"))
            else:  # datagen
                if self.batch or c.chance(30):
                    bounded = True
                    options.append(f"number_of_rows = {c.integer(1, 1000)}")
                if c.chance(30):
                    options.append(f"rows_per_second = {c.integer(1, 1000)}")
                if c.chance(20):
                    options.append(f"seed = {c.integer(0, 99)}")
                numeric = [col for col in columns if col.kind == "num" and col.ref == col.name]
                if numeric and c.chance(20):
                    options.append(f"fields.{numeric[0].name}.max = {c.integer(1, 1000)}")
        elements = [
            f"{col.ref} {c.choice(TYPE_SPELLINGS.get(col.type or '', [col.type or 'BINARY']))}"
            for col in columns
        ]
        watermarks: set[str] = set()
        times = [col for col in columns if col.kind == "time"]
        if times and c.chance(70):
            ts = c.choice(times)
            watermarks.add(ts.name)
            elements.append(f"WATERMARK FOR {ts.ref} AS {ts.ref} - {c.choice(INTERVALS[:2])}")
        options += self.hints()
        self.lines.append(
            f"CREATE SOURCE {_quote(name)} ({', '.join(elements)}) WITH ({', '.join(options)});"
        )
        self.relations.append(Relation(_quote(name), _quote(name), columns, watermarks, bounded))
        if on_error == "route" or c.chance(1):
            # malformed records: read by a query, or E0412
            errors = [Col(n, "STRING", "str") for n in ("raw", "file", "error")]
            relation = Relation(f"{_quote(name)}.errors", _quote(name), errors, set(), bounded)
            self.relations.append(relation)
            self.unread.append(relation)

    def sink(self, query: _Query) -> str:
        c = self.c
        name = _quote(self.name("out"))
        if query.plain_aggregates:
            mode = c.choice(["update", "complete"])
        elif query.windows:
            mode = c.choice(["append", "append", "update", "complete"])
            if query.stateful > 1 and c.chance(90):
                mode = "append"
        else:
            mode = "append"
        if c.chance(5):
            mode = c.choice(["append", "update", "complete", "overwrite"])
        connectors = {
            "append": ["console", "console", "noop", "memory", "files", "kafka"],
            "complete": ["console", "noop", "memory", "kafka"],
        }.get(mode, ["console", "noop", "kafka"])
        connector = c.choice(connectors if c.chance(97) else ["memory", "files"])
        options = [f"connector = '{connector}'"]
        if connector == "files":
            options += ["path = 'out'", f"format = '{c.choice(['json', 'parquet', 'csv'])}'"]
        elif connector == "kafka":
            options += ["topic = 'o'", "bootstrap_servers = 'localhost:9092'"]
        if mode != "append" or c.chance(20):
            options.append(f"mode = '{mode}'")
        options += self.hints()
        declared = ""
        if c.chance(15) and all(col.type for col in query.columns):
            declared = " (" + ", ".join(f"{col.ref} {col.type}" for col in query.columns) + ")"
            if c.chance(5):
                declared = " (k BIGINT)"
        self.lines.append(f"CREATE SINK {name}{declared} WITH ({', '.join(options)});")
        return name

    # ------------------------------------------------------------ steps

    def condition(self, columns: list[Col]) -> str:
        col = self.c.choice(columns)
        template = self.c.choice(CONDITIONS[col.kind])
        return template.format(c=col.ref, i=self.c.integer(0, 100))

    def step(self, q: _Query, in_view: bool) -> None:
        c = self.c
        kind = c.choice(
            [
                "where", "where", "select", "select", "extend", "drop", "rename", "explode",
                "key_by", "key_by", "partition", "partition_by", "window", "aggregate",
                "aggregate", "deduplicate", "join", "union", "route",
            ]
        )  # fmt: skip
        if q.stateful and kind in ("window", "aggregate", "deduplicate", "join") and c.chance(60):
            kind = "where"  # fewer stateful chains (E0702: after an aggregation, append mode only)
        cols = q.columns
        if kind == "where":
            q.steps.append(f"WHERE {self.condition(cols)}{self.with_hints()}")
        elif kind == "select":
            chosen = c.subset(cols)
            items = [col.ref for col in chosen]
            new = list(chosen)
            if c.chance(40):
                base = c.choice(cols)
                expr, kind_, type_ = c.choice(COMPUTED[base.kind])
                alias = self.fresh("c")
                items.append(f"{expr.format(c=base.ref)} AS {alias}")
                new.append(Col(alias, type_, kind_))
            if c.chance(5):
                items = ["*"]
                new = list(cols)
            q.steps.append(f"SELECT {', '.join(items)}{self.with_hints()}")
            q.columns = new
            if not all(any(col.name == k for col in new) for k in q.keys):
                q.keys = []
            q.watermarks &= {col.name for col in new}
        elif kind == "extend":
            base = c.choice(cols)
            expr, kind_, type_ = c.choice(COMPUTED[base.kind])
            if c.chance(10):  # any function sqlglot knows, with any arguments
                arguments = [c.choice([col.ref for col in cols] + ["1", "'x'", "NULL"])]
                expr, kind_, type_ = self.call(arguments * c.integer(0, 3)), "other", None
            alias = self.fresh("e") if c.chance(99) else cols[0].ref
            q.steps.append(f"EXTEND {expr.format(c=base.ref)} AS {alias}{self.with_hints()}")
            q.columns = [*cols, Col(alias, type_, kind_)]
        elif kind == "drop" and len(cols) > 1:
            dropped = c.subset(cols[1:])
            q.steps.append(f"DROP {', '.join(col.ref for col in dropped)}{self.with_hints()}")
            q.columns = [col for col in cols if col not in dropped] or cols[:1]
            if not all(any(col.name == k for col in q.columns) for k in q.keys):
                q.keys = []
        elif kind == "rename":
            old = c.choice(cols)
            new_name = self.fresh("r")
            q.steps.append(f"RENAME {old.ref} AS {new_name}{self.with_hints()}")
            q.columns = [Col(new_name, col.type, col.kind) if col == old else col for col in cols]
            if old.name in q.watermarks:
                q.watermarks = (q.watermarks - {old.name}) | {new_name}
            if old.name in q.keys:
                q.keys = []
        elif kind == "explode":
            arrays = [col for col in cols if col.kind == "array"]
            strings = [col for col in cols if col.kind == "str"]
            alias = self.fresh("x")
            if arrays:
                expr = c.choice(arrays).ref
            elif strings:
                expr = f"split({c.choice(strings).ref}, ',')"
            else:
                expr = f"array({c.choice(cols).ref})"
            q.steps.append(f"EXPLODE {expr} AS {alias}{self.with_hints()}")
            q.columns = [*cols, Col(alias, "STRING" if arrays or strings else None, "str")]
        elif kind == "key_by":
            keys = c.subset(cols, 1)[: c.integer(1, 2)]
            q.steps.append(f"KEY BY {', '.join(col.ref for col in keys)}")
            q.keys = [col.name for col in keys]
        elif kind == "partition":
            hint = self.with_hints() if c.chance(3) else ""  # a hint here is E0306
            q.steps.append(c.choice(PARTITION_STEPS) + hint)
            q.keys = []
        elif kind == "partition_by":
            col = c.choice(cols)
            expr = f"{col.ref} % 3" if col.kind == "num" else f"hash({col.ref})"
            q.steps.append(f"PARTITION BY {expr}")
            q.keys = []
        elif kind in ("window", "aggregate"):
            self.aggregate(q, windowed=kind == "window")
        elif kind == "deduplicate":
            text = "DEDUPLICATE"
            if c.chance(70):
                text += " ON " + ", ".join(col.ref for col in c.subset(cols)[:2])
            if c.chance(50) and (q.watermarks or c.chance(5)):
                text += f" WITHIN {c.choice(INTERVALS)}"
            q.steps.append(text + self.with_hints())
            q.stateful += 1
        elif kind == "join":
            self.join(q)
        elif kind == "union":
            same = [
                r
                for r in self.relations
                if [(col.name, col.type) for col in r.columns]
                == [(col.name, col.type) for col in cols]
                and all(col.type for col in cols)
            ]
            if not same and c.chance(95):
                return
            inputs = c.subset(same if same and c.chance(97) else self.relations)[:2]
            q.steps.append(f"UNION ALL {', '.join(r.name for r in inputs)}{self.with_hints()}")
            q.keys = []
            for other in inputs:
                q.watermarks &= other.watermarks
                self.merge(q, other)
        elif kind == "route" and (in_view or c.chance(10)):
            branches = [self.fresh("b") for _ in range(c.integer(1, 3))]
            if c.chance(1):
                branches.append(branches[0])  # E0223
            text = ", ".join(f"{b} WHEN {self.condition(cols)}" for b in branches)
            q.steps.append(f"ROUTE {text}{self.with_hints()}")
            q.routes.append((branches, list(cols), set(q.watermarks)))

    def call(self, arguments: list[str]) -> str:
        return f"{self.c.choice(function_names())}({', '.join(arguments)})"

    def aggregate(self, q: _Query, windowed: bool) -> None:
        c = self.c
        cols = q.columns
        text = ""
        out: list[Col] = []
        if c.chance(80) and not q.keys:
            keys = c.subset(cols)[:1]
            text += f"KEY BY {keys[0].ref} |> "
            q.keys = [keys[0].name]
        out = [col for col in cols if col.name in q.keys]
        times = [col for col in cols if col.kind == "time"]
        single = not q.keys
        hints = [self.with_hints(single=single), ""]
        if windowed and (times or c.chance(3)):
            ts = c.choice(times or cols)
            shape = c.choice(["TUMBLE", "HOP", "SESSION"])
            args = [ts.ref, c.choice(INTERVALS)]
            if shape == "HOP":
                args.append(c.choice(INTERVALS[1:2] + INTERVALS))
            if c.chance(50):
                hints.reverse()
            text += f"WINDOW {shape}({', '.join(args)}){hints[0]} |> "
            out += [
                Col("window_start", "TIMESTAMP", "time"),
                Col("window_end", "TIMESTAMP", "time"),
            ]
        count = "n" if all(col.name != "n" for col in out) else self.fresh("n")
        items = [f"count(*) AS {count}"]
        out.append(Col(count, "BIGINT", "num"))
        for _ in range(c.integer(0, 2)):
            col = c.choice(cols)
            function = {
                "num": ["sum", "max", "min", "avg", "approx_count_distinct"],
                "str": ["max", "min", "approx_count_distinct", "first"],
            }.get(col.kind, ["count", "max"])
            alias = self.fresh("a")
            items.append(f"{c.choice(function)}({col.ref}) AS {alias}")
            out.append(Col(alias, None, "num" if col.kind == "num" else "other"))
        if c.chance(1):
            items.append(cols[0].ref)  # a column outside any aggregate: E0216 unless a key
        q.steps.append(text + f"AGGREGATE {', '.join(items)}{hints[-1]}")
        q.columns = out
        q.keys = []
        q.watermarks = set()
        if "WINDOW" in text:
            q.windows += 1
        else:
            q.plain_aggregates += 1
        q.stateful += 1

    @staticmethod
    def merge(q: _Query, other: Relation) -> None:
        """What a UNION ALL or JOIN brings in from the other input."""
        q.plain_aggregates += other.plain_aggregates
        q.windows += other.windows
        q.stateful += other.stateful

    def join(self, q: _Query) -> None:
        """A JOIN on an equality; the sides' columns are kept apart so none is ambiguous.

        As the first step, the left side's columns are qualified with its name and a
        SELECT after the JOIN names them apart; later, the shared columns are renamed
        before the JOIN (columns computed by earlier steps have no qualifier).
        """
        c = self.c
        candidates = [r for r in self.relations if r.qualifier not in q.sides and "." not in r.name]
        if not candidates:
            return
        other = c.choice(candidates)
        right = other.qualifier
        left_names = {col.name for col in q.columns}
        shared = [col for col in other.columns if col.name in left_names]
        first = not q.steps and c.chance(70)
        if first:
            left = q.relation.qualifier + "."
            pairs = [(col, col) for col in shared if col.kind != "array"]
        else:
            left = ""
            renamed = {col.name: Col(self.fresh("r"), col.type, col.kind) for col in shared}
            if not c.chance(97):
                renamed = {}  # the shared columns stay ambiguous (E0202)
            if renamed:
                renames = [f"{_quote(old)} AS {_quote(new.name)}" for old, new in renamed.items()]
                q.steps.append(f"RENAME {', '.join(renames)}")
                q.columns = [renamed.get(col.name, col) for col in q.columns]
                q.watermarks = {renamed[w].name if w in renamed else w for w in q.watermarks}
            by_name = {col.name: col for col in q.columns}
            pairs = [
                (by_name[renamed[col.name].name], col)
                for col in shared
                if col.kind != "array" and col.name in renamed
            ]
        if not pairs or c.chance(5):
            pairs = [(c.choice(q.columns), c.choice(other.columns))]
        left_col, right_col = c.choice(pairs)
        condition = f"{left}{left_col.ref} = {right}.{right_col.ref}"
        left_times = [col for col in q.columns if col.name in q.watermarks]
        right_times = [col for col in other.columns if col.name in other.watermarks]
        kind = c.choice(["", "", "", "INNER "])
        if (left_times and right_times) or c.chance(15):
            kind = c.choice([kind, "LEFT ", "RIGHT OUTER ", "FULL ", "LEFT OUTER "])
        outer = kind.strip() not in ("", "INNER")
        if (outer or c.chance(20)) and left_times and right_times:
            lt, rt = left_times[0].ref, right_times[0].ref
            interval = c.choice(INTERVALS[:2])
            condition += f" AND {right}.{rt} BETWEEN {left}{lt} AND {left}{lt} + {interval}"
        if c.chance(1):
            condition = c.choice(["", "true", f"{left}{q.columns[0].ref} > 1"])
        on = f" ON {condition}" if condition else ""
        q.steps.append(f"{kind}JOIN {other.name}{on}{self.with_hints()}")
        q.sides.add(other.qualifier)
        q.stateful += 1
        self.merge(q, other)
        q.keys = []
        q.watermarks |= other.watermarks
        if first and shared and c.chance(95):
            items: list[str] = [f"{left}{col.ref} AS {col.ref}" for col in q.columns]
            columns = list(q.columns)
            for col in other.columns:
                if col.name in left_names:
                    alias = self.fresh("j")
                    items.append(f"{right}.{col.ref} AS {alias}")
                    columns.append(Col(alias, col.type, col.kind))
                    q.watermarks.discard(col.name)
                else:
                    items.append(col.ref)
                    columns.append(col)
            q.steps.append(f"SELECT {', '.join(items)}")
            q.columns = columns
        else:
            q.columns = [*q.columns, *other.columns]

    # ------------------------------------------------------------ queries

    def new_query(self, relation: Relation) -> _Query:
        q = _Query(relation, list(relation.columns), set(relation.watermarks))
        q.plain_aggregates, q.windows = relation.plain_aggregates, relation.windows
        q.stateful = relation.stateful
        q.sides.add(relation.qualifier)
        return q

    def pipe_query(self, relation: Relation, in_view: bool) -> _Query:
        q = self.new_query(relation)
        for _ in range(self.c.integer(0, 5)):
            self.step(q, in_view)
        ends_in_partition = q.steps and q.steps[-1].startswith(
            ("PARTITION", *PARTITION_STEPS, "KEY")
        )
        if in_view and ends_in_partition and self.c.chance(95):
            q.steps.append(f"WHERE {self.condition(q.columns)}")  # PySpark cannot end a view so
        return q

    def sql_query(self, relation: Relation) -> tuple[str, _Query]:
        c = self.c
        cols = relation.columns
        q = self.new_query(relation)
        shape = c.choice(["select", "where", "group", "window", "distinct", "union", "join"])
        chosen = c.subset(cols)
        items = ", ".join(col.ref for col in chosen)
        name = relation.name
        if shape == "select":
            text = f"SELECT {items} FROM {name}"
            q.columns = chosen
        elif shape == "where":
            text = f"SELECT * FROM {name} WHERE {self.condition(cols)}"
        elif shape == "group":
            key, count = chosen[0], self.fresh("n")
            text = f"SELECT {key.ref}, count(*) AS {count} FROM {name} GROUP BY {key.ref}"
            if c.chance(30):
                text += " HAVING count(*) > 1"
            q.columns = [key, Col(count, "BIGINT", "num")]
            q.plain_aggregates += 1
            q.stateful += 1
        elif shape == "window":
            times = [col for col in cols if col.kind == "time"]
            if not times and c.chance(97):
                return self.sql_query(relation)
            ts, key = c.choice(times or cols), chosen[0]
            window = f"window({ts.ref}, '{c.choice(['10 seconds', '1 minute'])}')"
            if c.chance(25):
                window = f"session_window({ts.ref}, '5 minutes')"
            w, count = self.fresh("w"), self.fresh("n")
            text = (
                f"SELECT {key.ref}, {window} AS {w}, count(*) AS {count} FROM {name}"
                f" GROUP BY {key.ref}, {window}"
            )
            q.columns = [key, Col(w, None, "other"), Col(count, "BIGINT", "num")]
            q.windows += 1
            q.stateful += 1
        elif shape == "distinct":
            text = f"SELECT DISTINCT {items} FROM {name}"
            q.columns = chosen
        elif shape == "union":
            same = [r for r in self.relations if r.columns == cols and "." not in r.name]
            other = c.choice(same if same and c.chance(97) else self.relations)
            text = f"SELECT * FROM {name} UNION ALL SELECT * FROM {other.name}"
        else:
            others = [
                r for r in self.relations if r.qualifier != relation.qualifier and "." not in r.name
            ]
            if not others:
                return self.sql_query(relation)
            other = c.choice(others)
            left, right = cols[0], other.columns[0]
            la, ra = self.fresh("l"), self.fresh("r")
            text = (
                f"SELECT {relation.qualifier}.{left.ref} AS {la}, "
                f"{other.qualifier}.{right.ref} AS {ra} FROM {name} "
                f"JOIN {other.name} ON {relation.qualifier}.{left.ref} = "
                f"{other.qualifier}.{right.ref}"
            )
            q.columns = [Col(a, col.type, col.kind) for a, col in ((la, left), (ra, right))]
        if c.chance(2):
            text += c.choice([" ORDER BY 1", " LIMIT 3", " WHERE", ")"])  # unsupported or broken
        return text, q

    def query(self, in_view: bool) -> tuple[str, _Query]:
        relation = self.c.choice(self.relations)
        if self.c.chance(12) and "." not in relation.name:
            return self.sql_query(relation)
        q = self.pipe_query(relation, in_view)
        return " |> ".join([f"FROM {relation.name}", *q.steps]), q

    def program(self) -> str:
        c = self.c
        self.settings()
        for _ in range(c.integer(1, 3)):
            self.source()
        for _ in range(c.integer(0, 3)):
            name = _quote(self.name("view"))
            text, q = self.query(in_view=True)
            self.lines.append(f"CREATE VIEW {name} AS {text};")
            self.relations.append(
                Relation(
                    name,
                    name,
                    q.columns,
                    q.watermarks,
                    False,
                    q.plain_aggregates,
                    q.windows,
                    q.stateful,
                )
            )
            for branches, columns, watermarks in q.routes:
                for branch in branches:
                    self.relations.append(Relation(f"{name}.{branch}", name, columns, watermarks))
        for _ in range(c.integer(1, 3) if c.chance(99) else 0):
            text, q = self.query(in_view=False)
            sink = self.sink(q)
            self.lines.append(f"INSERT INTO {sink} {text};")
        for relation in self.unread:
            if c.chance(95):
                q = self.pipe_query(relation, in_view=False)
                sink = self.sink(q)
                steps = "".join(f" |> {step}" for step in q.steps)
                self.lines.append(f"INSERT INTO {sink} FROM {relation.name}{steps};")
        if c.chance(2):
            i, j = c.integer(0, len(self.lines) - 1), c.integer(0, len(self.lines) - 1)
            self.lines[i], self.lines[j] = self.lines[j], self.lines[i]  # use before definition
        separator = c.choice(["\n", "\n", "\n\n", " ", "\r\n"])
        return separator.join(self.lines) + "\n"


def generate_program(chooser: Chooser) -> str:
    return ProgramGenerator(chooser).program()


# ----------------------------------------------------------------------------- mutations

TOKEN = re.compile(r"'(?:[^'\\]|\\.|'')*'|`[^`]*`|--[^\n]*|/\*.*?\*/|\|>|\w+|\s+|.", re.S)
#: Keywords the mutator inserts, besides tokens of the same file.
KEYWORDS = """SET CREATE SOURCE SINK VIEW AS WITH INSERT INTO FROM WHERE SELECT EXTEND DROP
RENAME EXPLODE KEY BY REBALANCE RESCALE SHUFFLE BROADCAST GLOBAL FORWARD PARTITION WINDOW
TUMBLE HOP SESSION AGGREGATE DEDUPLICATE ON WITHIN JOIN LEFT OUTER UNION ALL ROUTE WHEN
CASE END WATERMARK FOR GROUP HAVING DISTINCT NULL"""
KEYWORD_SET = frozenset(KEYWORDS.split()) | {"TRUE", "FALSE", "AND", "OR", "NOT", "IS", "IN"}
# fmt: off
VOCABULARY = [
    *KEYWORDS.split(),
    *["|>", "(", ")", "[", "]", "<", ">", ",", ";", "=", ".", ":", "-", "*", "%", "||"],
    *["'x'", "''", '"y"', "`q`", "``", "1", "0", "-1", "1e309", "99999999999999999999"],
    *["--", "/*", "*/", "'", "`", '"', "\\", "\n", "\t", "\r", "\x00", "\ufeff", "\u2028"],
    *["k", "v", "ts", "s", "o", "count(*)", "INTERVAL 1 SECOND", "parallelism", "uid"],
    *["max_parallelism", "connector", "'datagen'", "'console'", "mode", "'update'"],
]
# fmt: on
# fmt: off
CHARACTERS = [
    *"();,|>'`\"\\-*/=<.:[]{}$#@!?~^&%+ \t\n\r",
    "\x00", "\x1b", "\x7f", "\u00a0", "\u200b", "\u2028", "\u2029", "\ufeff", "\ufffd",
    "é", "ß", "Ω", "流", "🙂", "\u0301", "\u202e", "𝔘",
]
# fmt: on


#: Replacements of the same kind, which keep the syntax and so reach the later passes.
NUMBERS = ["0", "1", "2", "-1", "3", "8", "128", "32768", "32769", "1000000", "0.5", "1e309"]
STRINGS = ["''", "'x'", "'it''s'", "'\\n'", "'1 second'", "'update'", "'complete'", "'json'"]


def _same_kind(chooser: Chooser, token: str, tokens: list[str]) -> str:
    """Another number, string, quoted name or word: from the same file or a few odd ones."""
    if re.fullmatch(r"-?\d[\w.]*", token):
        return chooser.choice(NUMBERS)
    for opening, extra in (("'", STRINGS), ("`", ["`x`", "```", "`a b`"])):
        if token.startswith(opening):
            same = [t for t in tokens if t.startswith(opening)]
            return chooser.choice(same + extra)
    if chooser.chance(10):
        return chooser.choice(function_names())
    return chooser.choice([t for t in tokens if _is_name(t)] or [token])


@cache
def function_names() -> list[str]:
    """Every function name sqlglot's Spark dialect knows, sorted (so seeds reproduce)."""
    from sqlglot.dialects.spark import Spark

    return sorted(name.lower() for name in Spark.parser_class.FUNCTIONS)


def _is_name(token: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*", token)) and token.upper() not in KEYWORD_SET


def mutate_tokens(chooser: Chooser, text: str) -> str:
    """1-6 token-level edits: delete, insert, swap, duplicate, replace (by any token, or by
    one of the same kind), or a character inserted into a token. Three mutants in ten make
    only same-kind replacements (numbers, strings, quoted names, names), which keep the
    syntax, so that the later passes see them."""
    c = chooser
    tokens = TOKEN.findall(text)
    semantic = c.chance(30)  # only same-kind replacements: the syntax stays valid
    for _ in range(c.choice([1, 1, 1, 2, 2, 3, 4, 6])):
        if not tokens:
            tokens.append(c.choice(VOCABULARY))
            continue
        i = c.integer(0, len(tokens) - 1)
        operation = (
            "same"
            if semantic
            else c.choice(["delete", "insert", "swap", "duplicate", "replace", "same", "char"])
        )
        if operation == "same":
            words = [j for j, t in enumerate(tokens) if _is_name(t) or t[0] in "'`0123456789"]
            i = c.choice(words or [i])
            tokens[i] = _same_kind(c, tokens[i], tokens)
        elif operation == "delete":
            del tokens[i : i + c.choice([1, 1, 1, 2, 5])]
        elif operation == "insert":
            word = c.choice(VOCABULARY) if c.chance(70) else c.choice(tokens)
            tokens.insert(i, c.choice([" ", ""]) + word + c.choice([" ", ""]))
        elif operation == "swap":
            j = c.integer(0, len(tokens) - 1)
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif operation == "duplicate":
            tokens[i:i] = tokens[i : i + c.integer(1, 8)]
        elif operation == "replace":
            tokens[i] = c.choice(VOCABULARY) if c.chance(60) else c.choice(tokens)
        else:
            position = c.integer(0, len(tokens[i]))
            tokens[i] = tokens[i][:position] + c.choice(CHARACTERS) + tokens[i][position:]
    return "".join(tokens)


def mutate_bytes(chooser: Chooser, data: bytes) -> bytes:
    """1-6 byte-level edits: delete, insert, swap, duplicate, flip a bit, truncate."""
    c = chooser
    out = bytearray(data)
    for _ in range(c.integer(1, 6)):
        if not out:
            out.append(c.integer(0, 255))
            continue
        i = c.integer(0, len(out) - 1)
        operation = c.choice(["delete", "insert", "insert", "swap", "duplicate", "flip", "cut"])
        if operation == "delete":
            del out[i : i + c.choice([1, 1, 2, 4, 16])]
        elif operation == "insert":
            if c.chance(60):
                value = bytes([c.integer(0x20, 0x7E)])
            elif c.chance(50):
                value = bytes([c.integer(0, 255)])
            else:
                value = c.choice(CHARACTERS).encode("utf-8")
            out[i:i] = value
        elif operation == "swap":
            j = c.integer(0, len(out) - 1)
            out[i], out[j] = out[j], out[i]
        elif operation == "duplicate":
            out[i:i] = out[i : i + c.integer(1, 32)]
        elif operation == "flip":
            out[i] ^= 1 << c.integer(0, 7)
        elif c.chance(20):
            del out[i:]
    return bytes(out)


def fuzz_input(chooser: Chooser) -> tuple[str, bytes]:
    """One input of the soak's mix: (kind, the file's bytes)."""
    kind = chooser.choice(["generated", "generated", "tokens", "bytes"])
    if kind == "generated":
        text = generate_program(chooser)
        if chooser.chance(10):
            text = mutate_tokens(chooser, text)
            kind = "generated+tokens"
        return kind, text.encode("utf-8", "surrogatepass")
    example = EXAMPLES[chooser.choice(sorted(EXAMPLES))]
    if kind == "tokens":
        return kind, mutate_tokens(chooser, example).encode("utf-8", "surrogatepass")
    return kind, mutate_bytes(chooser, example.encode("utf-8"))


# ----------------------------------------------------------------------------- harness


class BrokenInvariant(AssertionError):
    """flowc did not crash but broke a promise (an error without a diagnostic, ...)."""


@dataclass
class Outcome:
    """What every pass made of one input.

    ``kind``: ``compiled`` (every stage, PySpark included), ``spark`` (Flink's plans, but
    Spark's rules or the Spark backend's checks reject it: check/run/--emit pyspark fail),
    ``diagnostic`` (errors), or ``not-utf8`` (the CLI refuses the file: exit 2). A program
    ``flowc check`` passes always generates: the PySpark generator refusing one is a
    broken promise.
    """

    kind: str
    codes: tuple[str, ...] = ()

    @property
    def check_exit(self) -> int:
        """The exit code ``flowc check`` must give."""
        return {"compiled": 0, "not-utf8": 2}.get(self.kind, 1)

    @property
    def emit_exit(self) -> int:
        """The exit code ``flowc compile --emit all`` / ``--emit pyspark`` must give."""
        return {"compiled": 0, "not-utf8": 2}.get(self.kind, 1)


def decode(data: bytes) -> str | None:
    """The text the CLI reads from these bytes, or None where it refuses them (exit 2)."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None


def _check_diagnostics(diagnostics: Sequence[flowc.Diagnostic], text: str, errors: bool) -> None:
    if errors and not any(d.severity is Severity.ERROR for d in diagnostics):
        raise BrokenInvariant(f"CompileError without an error: {diagnostics}")
    lines = max(len(text.splitlines()), text.count("\n")) + 1
    for d in diagnostics:
        if not re.fullmatch(r"[EW]\d{4}", d.code) or not d.message:
            raise BrokenInvariant(f"malformed diagnostic {d}")
        if not 1 <= d.span.line <= lines:
            raise BrokenInvariant(f"diagnostic outside the file (line {lines} is the last): {d}")


def run_passes(text: str, filename: str = "fuzz.flow", *, emit: bool = True) -> Outcome:
    """Every pass, then (``emit``) every stage in every format and the PySpark program.

    Diagnostics are rendered as the CLI renders them (text, with and without colour, and
    JSON). JSON stages must parse; the PySpark program must be valid Python. A crash
    propagates; a broken promise raises :class:`BrokenInvariant`.
    """
    try:
        job = flowc.compile(text, filename)
    except flowc.CompileError as error:
        _check_diagnostics(error.diagnostics, text, errors=True)
        render_text(error.diagnostics, {filename: text}, color=False)
        render_text(error.diagnostics, {filename: text}, color=True)
        json.loads(render_json(error.diagnostics))
        codes = sorted({d.code for d in error.diagnostics if d.severity is Severity.ERROR})
        return Outcome("diagnostic", tuple(codes))
    _check_diagnostics(job.diagnostics, text, errors=False)
    _check_diagnostics(job.spark_diagnostics, text, errors=False)
    if job.diagnostics:
        render_text(job.diagnostics, {filename: text}, color=False)
    if not emit:
        return Outcome("compiled" if not job.spark_diagnostics else "spark")
    for stage, formats in STAGE_FORMATS.items():
        if stage == "pyspark":
            continue
        for fmt in formats:
            output = _render_stage(job, stage, fmt)
            if not output:
                raise BrokenInvariant(f"--emit {stage} --format {fmt} printed nothing")
            if fmt == "json":
                json.loads(output)
    try:  # as flowc check, flowc run and --emit pyspark compile it
        job = flowc.compile(text, filename, for_spark=True)
    except flowc.CompileError as error:
        render_text(error.diagnostics, {filename: text}, color=False)
        codes = sorted({d.code for d in error.diagnostics if d.severity is Severity.ERROR})
        return Outcome("spark", tuple(codes))
    try:
        program = _render_stage(job, "pyspark", "text")
    except NotRunnable as error:
        raise BrokenInvariant(
            f"flowc check passes, but the PySpark generator refuses it: {error}"
        ) from None
    try:
        pyast.parse(program)
    except SyntaxError as error:
        raise BrokenInvariant(f"the generated PySpark program is not Python: {error}") from None
    return Outcome("compiled")


def run_data(data: bytes, filename: str = "fuzz.flow", *, emit: bool = True) -> Outcome:
    text = decode(data)
    if text is None:
        return Outcome("not-utf8")
    return run_passes(text, filename, emit=emit)


#: The CLI invocations :func:`run_cli` makes, with the outcome property giving their exit.
CLI_COMMANDS: list[tuple[list[str], str]] = [
    (["check", "{file}"], "check_exit"),
    (["check", "--format", "json", "{file}"], "check_exit"),
    (["compile", "{file}", "--emit", "all", "-o", "{out}"], "emit_exit"),
    (["compile", "{file}", "--emit", "pyspark"], "emit_exit"),
]


@dataclass
class CliResult:
    argv: list[str]
    code: int
    expected: int
    stderr: str


def run_cli(data: bytes, directory: Path, expected: Outcome | None = None) -> list[CliResult]:
    """``flowc.cli.main.main`` in-process on the bytes, for each of :data:`CLI_COMMANDS`."""
    path = directory / "fuzz.flow"
    path.write_bytes(data)
    outcome = expected or run_data(data, path.as_posix())
    results = []
    for template, exit_property in CLI_COMMANDS:
        argv = [
            a.format(file=path.as_posix(), out=(directory / "all").as_posix()) for a in template
        ]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        results.append(CliResult(argv, code, getattr(outcome, exit_property), err.getvalue()))
    return results


def cli_problem(result: CliResult) -> str | None:
    """Why a CLI result is wrong, or None."""
    if result.code not in (0, 1, 2):
        return f"exit {result.code}: {result.stderr}"
    if "Traceback" in result.stderr:
        return f"a traceback on stderr: {result.stderr}"
    if result.code != result.expected:
        return f"exit {result.code}, expected {result.expected}: {result.stderr}"
    return None


def run_cli_subprocess(paths: Sequence[Path], arguments: Sequence[str]) -> tuple[int, str]:
    """``python -m flowc <arguments> <paths>`` as a real process: (exit code, stderr)."""
    env = dict(os.environ)
    env.setdefault("FLOWC_CRASH_DIR", tempfile.gettempdir())
    process = subprocess.run(
        [sys.executable, "-m", "flowc", *arguments, *map(str, paths)],
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
    )
    return process.returncode, process.stderr.decode("utf-8", "replace")


# ------------------------------------------------------------------- nesting and YAML

NESTED_HEADER = (
    "CREATE SOURCE s (k BIGINT, x BIGINT, b BOOLEAN) WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)

#: Each kind of nesting as (prefix, suffix) wrapped around an operand once a level, or
#: (chain link, "") appended once a level: what crashed flowc with exit 101 past some
#: depth (issue 25, item 7).
NESTINGS: dict[str, tuple[str, str]] = {
    "brackets": ("(", ")"),
    "brackets of arrays": ("array(", ")"),
    "unary minus": ("- ", ""),
    "unary minus bracketed": ("-(", ")"),
    "bitwise not": ("~ ", ""),
    "NOT": ("NOT ", ""),
    "function calls": ("abs(", ")"),
    "CASE": ("CASE WHEN x > 1 THEN ", " END"),
    "CAST": ("CAST(", " AS BIGINT)"),
    "type names called": ("string(", ")"),
    "coalesce": ("coalesce(", ", 1)"),
    "IS NOT NULL chain": (" = true IS NOT NULL", "chain"),
    "BETWEEN chain": (" BETWEEN 1 AND 2", "chain"),
    "cast chain": ("::BIGINT", "chain"),
    "alternating + and -": (" + 1 - 1", "chain"),
}


def nested_expression(chooser: Chooser) -> tuple[str, int]:
    """An expression nesting one to four kinds, each a random number of levels (often
    near or far past flowc's bounds); and the most levels of one kind."""
    kinds = chooser.subset(sorted(NESTINGS), low=1)[:4]
    expression = "x"
    total = 0
    for kind in kinds:
        levels = chooser.choice([1, 3, 4, 5, 30, 63, 64, 65, 100, 159, 161, 400, 3000])
        total = max(total, levels)
        before, after = NESTINGS[kind]
        if after == "chain":
            expression = "(" + expression + ")" + before * levels
        else:
            expression = before * levels + expression + after * levels
    return expression, total


def nested_program(chooser: Chooser) -> tuple[str, int]:
    expression, levels = nested_expression(chooser)
    where = chooser.choice(["WHERE {e} IS NOT NULL", "SELECT {e} AS y", "EXTEND {e} AS y"])
    step = where.format(e=expression)
    return NESTED_HEADER + f"INSERT INTO o FROM s |> {step};\n", levels


def nested_yaml(chooser: Chooser) -> str:
    """A test file's YAML with random nesting, aliases, tags and cycles."""
    parts = ["tests:\n  - name: t\n    given:\n      s:\n"]
    kind = chooser.choice(["nesting", "aliases", "tag", "cycle", "plain", "laughs"])
    if kind == "nesting":
        depth = chooser.choice([1, 10, 60, 65, 1000, 20_000])
        parts.append("        - {k: " + "[" * depth + "]" * depth + "}\n")
    elif kind == "tag":
        tag = chooser.choice(
            ["!!python/object:os.system", "!!set", "!!binary", "!local", "!!str", "!!int"]
        )
        parts.append(f"        - {{k: {tag} 1}}\n")
    elif kind == "cycle":
        parts.append("        - &a {k: [*a]}\n")
    elif kind == "laughs":
        levels = chooser.integer(1, 12)
        parts = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"]
        for level in range(1, levels + 1):
            parts.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]\n")
        parts.append(f"tests: *l{levels}\n")
        return "".join(parts)
    elif kind == "aliases":
        parts.append("        - &row {k: 1, v: a}\n" + "        - *row\n" * chooser.integer(1, 50))
    else:
        parts.append("        - {k: 1, v: a}\n")
    parts.append("    expect:\n      o: []\n")
    return "".join(parts)


def seeded(seed: int) -> RandomChooser:
    return RandomChooser(random.Random(seed))


__all__ = [
    "CLI_COMMANDS",
    "EXAMPLES",
    "BrokenInvariant",
    "Chooser",
    "CliResult",
    "DrawChooser",
    "Outcome",
    "RandomChooser",
    "cli_problem",
    "decode",
    "fuzz_input",
    "generate_program",
    "mutate_bytes",
    "mutate_tokens",
    "nested_expression",
    "nested_program",
    "nested_yaml",
    "run_cli",
    "run_cli_subprocess",
    "run_data",
    "run_passes",
    "seeded",
]
