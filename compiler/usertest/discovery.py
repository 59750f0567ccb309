"""Which test files a ``flowc test PATH...`` means, and the job beside each."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from flowc.usertest.model import TEST_SUFFIX


def test_files(paths: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(test file, its job) for files and folders given (a folder: every *.test.yaml under
    it); a test file's job is the .flow beside it with the same name."""
    for given in paths:
        path = Path(given)
        found = sorted(path.rglob(f"*{TEST_SUFFIX}")) if path.is_dir() else [path]
        for test in found:
            job = test.with_name(test.name.removesuffix(TEST_SUFFIX) + ".flow")
            yield str(test), str(job)
