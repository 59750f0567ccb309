"""flowc's version, in a module of its own: the modules that write it (reports, generated
programs, ``--version``) import it from here, not from the package's ``__init__``, which
imports the whole compiler."""

from __future__ import annotations

__version__ = "0.1.0"
