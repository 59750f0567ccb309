"""Shared pytest configuration for flowc's tests.

Hypothesis: under CI (the ``CI`` environment variable set and not ``0`` or ``false``, as
``.ci/run`` and CI runners set it) the ``ci`` profile is loaded. It is derandomized: every
property test draws the same examples on every run, seeded from the test function itself, so a
CI failure reproduces on any machine with ``CI=1 pytest <test>`` (no seed to copy from a
log), and it prints the ``@reproduce_failure`` blob of the failing example as well. Outside
CI the default profile explores new random examples each run and keeps failures in the
local example database.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from tests.helpers.postgres_server import postgres  # noqa: F401 (a session fixture)

# The warm Spark (docs/warm-spark.md): flowc run and flowc test use a running one. The
# suite never sees a developer's: its state folder is one of its own, empty but where
# tests/test_warm_spark.py starts a server.
os.environ["FLOWC_STATE_DIR"] = tempfile.mkdtemp(prefix="flowc-test-state-")

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() not in ("", "0", "false"):
    settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-data",
        action="store_true",
        default=False,
        help="rewrite the expectation comments (-- E: / -- W:) of tests/data/check/*.test "
        "from the compiler's actual output",
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("flowc-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
