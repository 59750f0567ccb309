"""``python -m flowc``: the command line, in a process of its own."""

from __future__ import annotations

import gc
import sys

from flowc.cli.main import main


def run() -> None:
    """Run the command line, then end the process.

    The modules loaded so far (flowc's, sqlglot's) live as long as the process: frozen,
    the cyclic collector's full collections skip them (one such collection, as the
    diagnostics of a job of 1,000 operators are written, took 45 ms over them).
    As the interpreter shuts down, the cyclic collector makes a last pass over every
    object still alive (sqlglot's modules, the compiled job): 30 to 50 ms, to find
    garbage that goes with the process anyway. Frozen objects are skipped, so they are
    frozen first; exit handlers and the flushing of output run as usual.
    """
    gc.freeze()
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
