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
    """Replace the ``## title`` section of ``path`` where it stands (or add it at the end),
    keeping the others and their order: prose written after a section stays after it."""
    file = Path(path)
    text = file.read_text(encoding="utf-8") if file.exists() else HEADER
    if not text.startswith(HEADER):
        text = HEADER + "\n" + text
    sections = [s.strip("\n") for s in text[len(HEADER) :].split("\n## ") if s.strip()]
    new = f"{title}\n\n{body.strip()}"
    mine = [i for i, s in enumerate(sections) if s.lstrip("# ").startswith(title)]
    if mine:
        sections[mine[0]] = new
        sections = [s for i, s in enumerate(sections) if i not in mine[1:]]
    else:
        sections.append(new)
    file.write_text(HEADER + "\n## " + "\n\n## ".join(s.lstrip("# ") for s in sections) + "\n")
