"""``python -m flowc``: the command line, in a process of its own."""

from __future__ import annotations

import gc
import sys

from flowc.cli.main import WRITERS, main


def run() -> None:
    """Run the command line, then end the process.

    The modules loaded so far (flowc's, sqlglot's) live as long as the process: frozen
    before any command but the writers, the cyclic collector's full collections skip them
    (one such collection, as the diagnostics of a job of 1,000 operators are written, took
    45 ms over them).
    As the interpreter shuts down, the cyclic collector makes a last pass over every
    object still alive (sqlglot's modules, the compiled job): 30 to 50 ms, to find
    garbage that goes with the process anyway. Frozen objects are skipped, so they are
    frozen first; exit handlers and the flushing of output run as usual.
    """
    command = sys.argv[1] if len(sys.argv) > 1 else None
    # The writers (check, compile, diff, fmt) run with the collector off and end by moving
    # what they made to its oldest generation, which they may do only when nothing is
    # frozen (flowc.outputs.without_young_collections; else one young collection over the
    # job as the collector comes back on, 6 ms at 1,000 operators): they freeze at the end.
    if command not in WRITERS:
        gc.freeze()
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
