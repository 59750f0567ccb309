"""flowc: a compiler for declarative streaming jobs (``.flow`` files).

The public API: :func:`compile` and :func:`compile_file` return a :class:`CompiledJob`;
bad input raises :class:`CompileError`, which carries the diagnostics as objects. A job's
:meth:`~CompiledJob.outputs` are what each INSERT writes (Spark types), and its
:meth:`~CompiledJob.pyspark_program` the program ``flowc run`` runs: docs/api.md.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from flowc.outputs import without_young_collections

_METADATA = "importlib.metadata"
_metadata_lock = threading.Lock()


@contextmanager
def _metadata_on_first_use() -> Iterator[None]:
    """While sqlglot's modules are imported, ``importlib.metadata`` is a stand-in that
    imports the real module the first time anything of it is used.

    sqlglot.dialects.dialect imports ``entry_points`` at its top, to look up dialect
    plugins by name; flowc names only dialects sqlglot defines, so it is never called
    while compiling, yet the module and what it imports (email, zipfile, csv, socket: 33
    modules) were 10 ms of every ``import flowc``. sqlglot keeps the stand-in's
    ``entry_points``, which calls the real one; any other public name read off the
    stand-in (by another thread importing the module meanwhile) is the real module's.
    Once sqlglot is imported the name is the real module's again (imported when first
    asked for), and when the real module is already loaded nothing changes."""
    if _METADATA in sys.modules:
        yield
        return
    stand_in = ModuleType(_METADATA, "importlib.metadata, imported on first use (flowc).")

    def real() -> ModuleType:
        with _metadata_lock:
            if sys.modules.get(_METADATA) is stand_in:
                del sys.modules[_METADATA]
        import importlib.metadata

        return importlib.metadata

    def entry_points(**params: object) -> object:
        return real().entry_points(**params)

    def attribute(name: str) -> object:
        if name.startswith("__"):  # the import system asks for __path__: not a package
            raise AttributeError(name)
        return getattr(real(), name)

    stand_in.entry_points = entry_points  # type: ignore[attr-defined]
    stand_in.__getattr__ = attribute  # type: ignore[method-assign]
    sys.modules[_METADATA] = stand_in
    # `import importlib.metadata` in another thread meanwhile finds the name in
    # sys.modules and then reads the package's attribute, which the import system sets
    # only when it loads the module: the stand-in sets it too (the real import replaces it).
    setattr(importlib, "metadata", stand_in)  # noqa: B010 (mypy knows the real module's type)
    try:
        yield
    finally:
        with _metadata_lock:
            if sys.modules.get(_METADATA) is stand_in:
                del sys.modules[_METADATA]
            if getattr(importlib, "metadata", None) is stand_in:
                delattr(importlib, "metadata")


# The modules' objects (flowc's and sqlglot's) live as long as the process: made without
# the cyclic collector's young collections over them (flowc.outputs).
with without_young_collections(), _metadata_on_first_use():
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
