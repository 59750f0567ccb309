"""BENCHMARKS.md has one section per benchmark; each benchmark rewrites only its own."""

from __future__ import annotations

import os
import platform
from pathlib import Path

HEADER = "# Benchmarks\n"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def update_section(path: str, title: str, body: str) -> None:
    """Replace the ``## title`` section of ``path`` (or add it), keeping the others."""
    file = Path(path)
    text = file.read_text(encoding="utf-8") if file.exists() else HEADER
    if not text.startswith(HEADER):
        text = HEADER + "\n" + text
    sections = text[len(HEADER) :].split("\n## ")
    kept = [s for s in sections if s.strip() and not s.lstrip("# ").startswith(title)]
    new = f"{title}\n\n{body.strip()}\n"
    parts = [s.strip("\n") for s in kept] + [new.strip("\n")]
    file.write_text(HEADER + "\n## " + "\n\n## ".join(p.lstrip("# ") for p in parts) + "\n")
