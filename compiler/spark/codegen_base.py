"""What every part of ``--emit pyspark`` shares: the program's lines as they are written,
the generator's state, and the text helpers for user names and connector options.

Code generation is one class, :class:`flowc.spark.codegen.PysparkGenerator`, assembled from a
part per concern (:mod:`flowc.spark.codegen_sources`, :mod:`flowc.spark.codegen_steps`,
:mod:`flowc.spark.codegen_sinks`); each part extends :class:`ProgramText`, which holds what they
all read and write.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import TYPE_CHECKING

from flowc.fast_dataclass import dataclass
from flowc.program import Step, cdc_join, change_flow
from flowc.spark.changelog_chains import updating_chain
from flowc.spark.streaming import filtered_upsert

if TYPE_CHECKING:
    from flowc.job import CompiledJob


def in_docstring(text: str) -> str:
    """User text made safe inside a generated docstring: quotes and backslashes escaped, and
    control characters and lone surrogates (a file name that is not UTF-8) written as
    escapes, which a NUL must be and which keeps the program valid UTF-8."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Writer:
    """The program's lines; each call adds one, indented by four spaces a level."""

    lines: list[str] = field(default_factory=list)

    def __call__(self, line: str = "", indent: int = 0) -> None:
        self.lines.append(("    " * indent + line).rstrip())


class ProgramText:
    """The job being written and the state of its program text."""

    def __init__(self, job: CompiledJob) -> None:
        self.job = job
        self.program = job.program
        self.spark_plan = job.spark_plan
        self.partitions = self.spark_plan.shuffle_partitions
        self.batch = self.spark_plan.batch
        self.reader = "spark.read" if self.batch else "spark.readStream"
        self.w = Writer()
        #: The program's variable for each ``source:NAME`` function, ``stream:NAME``,
        #: ``errors:SOURCE`` and ``side:VIEW.OUTPUT`` DataFrame.
        self.names: dict[str, str] = {}
        #: The parts (DataFrame, producing StreamNode) at the end of each view and side output.
        self.tails: dict[str, list[tuple[str, int]]] = {}
        #: The partition step a view ends with, if any.
        self.view_partitions: dict[str, Step | None] = {}
        self.counter = 0
        #: json and csv file sources, whose records can be malformed, in declaration order.
        self.parsed_sources = [s for s in self.program.sources if s.on_error is not None]
        #: Whether a step joins a versioned table as of event time (a temporal join).
        self.temporal_joins = bool(self.spark_plan.temporal_joins)
        #: The steps reading a CDC source's changes or a processor's (by ``id``): a SELECT
        #: keeps their kind.
        #: The WHEREs between an AGGREGATE and an upsert sink run as marks (by ``id``), each
        #: with whether it is the first of its INSERT (:func:`filtered_upsert`).
        self.marking: dict[int, bool] = {}
        #: The INSERTs (by index) whose sink reads those marks as changes.
        self.marked_inserts: set[int] = set()
        carrying: set[int] = set()
        for index, insert in enumerate(self.program.inserts):
            found = None if self.batch else filtered_upsert(self.program, insert)
            if found is not None and found.marking:
                self.marking.update({i: i == id(found.where) for i in found.marking})
                self.marked_inserts.add(index)
                carrying |= found.carrying
        self.change_reading = {
            *change_flow(self.program).reading,
            *self.carrying_projections(),
            *carrying,
        }
        #: The steps after a CDC join (by ``id``): its processor's rows belong to no
        #: relation, so their columns are read by name alone (unique there).
        self.unqualified: set[int] = set()
        for insert in self.program.inserts:  # a CDC join's changes go on to its sink
            joined = cdc_join(self.program, insert)
            if joined is not None and not self.batch:
                self.change_reading |= joined.carrying  # an AGGREGATE's changes to the JOIN
                for step in joined.after:
                    self.change_reading.add(id(step))
                    self.unqualified.add(id(step))

    def carrying_projections(self) -> set[int]:
        """The projections of the streaming INSERTs' updating chains whose changes a
        processor emits (:mod:`flowc.spark.changelog_chains`)."""
        if self.batch:
            return set()
        found: set[int] = set()
        for insert in self.program.inserts:
            chain = updating_chain(self.program, insert)
            if chain is not None:
                found |= chain.carrying
        return found

    def var(self, hint: str) -> str:
        """A fresh, valid Python identifier derived from a user name."""
        base = re.sub(r"\W", "_", hint.encode("ascii", "replace").decode()).strip("_").lower()
        self.counter += 1
        return f"{base or 'x'}_{self.counter}" if base[:1].isalpha() else f"v_{self.counter}"

    def copy_functions(self, text: str) -> None:
        """Functions of :mod:`flowc.spark.generated_runtime`, copied into the program."""
        for line in text.splitlines():
            self.w(line)
        self.w("")
        self.w("")


_SPARK_OPTION_NAMES = {
    "max_files_per_trigger": "maxFilesPerTrigger",
    "latest_first": "latestFirst",
    "multiline": "multiLine",
    "timestamp_format": "timestampFormat",
    "date_format": "dateFormat",
    "null_value": "nullValue",
    "line_sep": "lineSep",
}


def spark_option_name(key: str) -> str:
    return _SPARK_OPTION_NAMES.get(key, key)


def format_options(options: dict[str, object]) -> dict[str, str]:
    """A files connector's format options under Spark's names (path and format apart)."""
    return {
        spark_option_name(k): option_text(v)
        for k, v in options.items()
        if k not in ("path", "format", "partition_by", "key") and not k.startswith("debezium-json.")
    }


def option_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def kafka_options(options: dict[str, object], names: dict[str, str]) -> list[tuple[str, str]]:
    """The options Spark's Kafka connector takes, as (Spark's name, text): the ones in
    ``names`` renamed, then every ``kafka.*`` client property verbatim (Spark hands them to
    the Kafka client with the prefix removed), in the order written."""
    renamed = [(names[k], option_text(v)) for k, v in options.items() if k in names]
    verbatim = [(k, option_text(v)) for k, v in options.items() if k.startswith("kafka.")]
    return renamed + verbatim
