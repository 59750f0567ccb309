"""A console sink on the warm Spark (docs/warm-spark.md, "Console sinks"): Spark's console
sink prints on the server's standard output, its log, so in the warm path the generated
program writes each console query through ``foreachBatch`` with a :class:`ShowBatch`
instead. The server runs it (the same Python and flowc: the record's fingerprint; pickled
by reference, as this module is importable there), renders the micro-batch as Spark's
console sink does, and leaves the text in a per-run folder on this machine's filesystem
(the server binds 127.0.0.1); the client's :class:`Relay` prints each batch's text as it
appears, in batch order, on its own standard output, where the cold run's JVM prints.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

#: Spark's ConsoleWrite: this line, ``Batch: N``, this line, then the rows as ``show``.
DASHES = "-" * 43
_BATCH_FILE = re.compile(r"(\d+)\.txt")


@dataclass(frozen=True, slots=True)
class ShowBatch:
    """One console sink's foreachBatch function: ``rows`` and ``truncate`` are the sink's
    numRows and truncate options, as the cold program gives them to Spark's console sink."""

    folder: str
    query: str
    rows: int
    truncate: bool

    def __call__(self, batch: Any, batch_id: int) -> None:
        """Writes the batch's text as ConsoleWrite prints it (``println`` of the dashes, the
        label, the dashes, then ``show``: its table and a newline), atomically: a batch run
        again after a failure replaces its file whole."""
        shown = batch._show_string(self.rows, self.truncate)
        text = f"{DASHES}\nBatch: {batch_id}\n{DASHES}\n{shown}\n"
        target = Path(self.folder) / self.query
        target.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, target / f"{batch_id}.txt")


@dataclass
class Relay:
    """The client's side: a per-run folder the ShowBatch functions write to, and the
    batches printed from it so far, per query."""

    out: TextIO
    folder: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="flowc-console-"))
    printed: dict[str, int] = field(default_factory=dict)

    def writer(self, query: str, rows: int, truncate: bool) -> ShowBatch:
        """The foreachBatch function of console query ``query`` (the generated program's
        CONSOLE_RELAY)."""
        return ShowBatch(self.folder, query, rows, truncate)

    def print_new(self) -> None:
        """Each query's batches not printed yet, in batch order (a query runs its batches
        one after another, and each file appears whole before its batch commits)."""
        root = Path(self.folder)
        for query in sorted(os.listdir(root)):
            last = self.printed.get(query, -1)
            found = sorted(
                int(m.group(1))
                for name in os.listdir(root / query)
                if (m := _BATCH_FILE.fullmatch(name))
            )
            for batch in (b for b in found if b > last):
                self.out.write((root / query / f"{batch}.txt").read_text(encoding="utf-8"))
                self.printed[query] = batch
        self.out.flush()

    def finish(self) -> None:
        """Print the rest (every batch the queries committed), then remove the folder."""
        try:
            self.print_new()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
