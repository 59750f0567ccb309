"""Shared pytest configuration for flowc's tests."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-data",
        action="store_true",
        default=False,
        help="rewrite the expectation comments (-- E: / -- W:) of tests/data/check/*.test "
        "from the compiler's actual output",
    )
