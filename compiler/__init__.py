"""flowc: a compiler for declarative streaming jobs (``.flow`` files).

The public API: :func:`compile` and :func:`compile_file` return a :class:`CompiledJob`;
bad input raises :class:`CompileError`, which carries the diagnostics as objects. A job's
:meth:`~CompiledJob.outputs` are what each INSERT writes (Spark types), and its
:meth:`~CompiledJob.pyspark_program` the program ``flowc run`` runs: docs/api.md.
"""

from __future__ import annotations

from flowc.outputs import without_young_collections

# The modules' objects (flowc's and sqlglot's) live as long as the process: made without
# the cyclic collector's young collections over them (flowc.outputs).
with without_young_collections():
    from flowc._version import __version__
    from flowc.diagnostics import CompileError, Diagnostic, Severity
    from flowc.driver import compile, compile_file
    from flowc.job import CompiledJob, SinkOutput
    from flowc.spans import Span
    from flowc.sql.python_functions import PythonFunction

__all__ = [
    "CompileError",
    "CompiledJob",
    "Diagnostic",
    "PythonFunction",
    "Severity",
    "SinkOutput",
    "Span",
    "__version__",
    "compile",
    "compile_file",
]
