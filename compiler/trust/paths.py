"""Whether an untrusted program's ``files`` path stays in its base directory: no URI
scheme, not absolute, no glob alternative or escape, no ``..`` or symbolic link leading
out (E0953, E0954). A look for links that cannot finish (too many entries, a folder it
cannot list) refuses the path (E0959): what flowc could not check is not allowed."""

from __future__ import annotations

import os
import re
from pathlib import PurePath, PurePosixPath

from flowc.errorcodes import Code
from flowc.trust.lists import SYMLINK_SCAN_LIMIT, URI_SCHEMES

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_GLOB_ESCAPES = ("{", "}", "\\")


def path_problem(path: str, base: str) -> tuple[Code, str] | None:
    """Why an untrusted program may not use ``path`` under ``base`` (resolved): the code
    (E0953, E0954 or E0959) and the reason, or None when it may."""
    scheme = _SCHEME.match(path)
    if scheme and scheme.group(1).lower() not in URI_SCHEMES:
        return Code.E0954, f"has the URI scheme '{scheme.group(1)}:' (only plain relative paths)"
    if os.path.isabs(path) or path.startswith("\\"):
        return Code.E0953, "is absolute"
    if any(c in path for c in _GLOB_ESCAPES):
        return (
            Code.E0953,
            "uses '{', '}' or '\\' (glob alternatives and escapes can name other folders)",
        )
    if any(not c.isprintable() for c in path):
        return Code.E0953, "holds control characters"
    target = os.path.realpath(os.path.join(base, path))
    if not _inside(target, base):
        if ".." in PurePosixPath(path).parts:
            return Code.E0953, "climbs out of the base directory"
        return Code.E0953, "leads out of the base directory through a symbolic link"
    return _link_out(_static_prefix(target, base), base)


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _static_prefix(target: str, base: str) -> str:
    """The folder part of ``target`` before any glob wildcard (``*``, ``?``, ``[``)."""
    parts = PurePath(target).parts
    kept: list[str] = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        kept.append(part)
    return str(PurePath(*kept)) if kept else base


def _link_out(folder: str, base: str) -> tuple[Code, str] | None:
    """The problem with ``folder`` (or what is under it): a symbolic link leading out of
    ``base`` (E0953), or a look that could not finish (E0959): more than
    :data:`SYMLINK_SCAN_LIMIT` entries, or a folder that cannot be listed. Paths shown
    relative to ``base``."""
    if not os.path.isdir(folder):
        return None
    unreadable: list[OSError] = []
    seen = 0
    for root, dirs, files in os.walk(folder, onerror=unreadable.append, followlinks=False):
        if unreadable:
            break
        for entry in (*dirs, *files):
            seen += 1
            if seen > SYMLINK_SCAN_LIMIT:
                return (
                    Code.E0959,
                    f"holds more than {SYMLINK_SCAN_LIMIT:,} entries: flowc could not check "
                    "them all for symbolic links that lead out of the base directory",
                )
            full = os.path.join(root, entry)
            if os.path.islink(full) and not _inside(os.path.realpath(full), base):
                link = os.path.relpath(full, base)
                return (
                    Code.E0953,
                    f"holds a symbolic link that leads out of the base directory ({link})",
                )
    if unreadable:
        error = unreadable[0]
        where = os.path.relpath(error.filename, base) if error.filename else "a folder"
        reason = error.strerror or type(error).__name__
        return (
            Code.E0959,
            f"holds a folder flowc cannot list ({where}: {reason}), so could not check it "
            "for symbolic links that lead out of the base directory",
        )
    return None
