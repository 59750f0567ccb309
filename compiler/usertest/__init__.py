"""``flowc test``: tests for users' own jobs, in YAML files beside them (docs/testing.md).

The package reads the test files (:mod:`.reader`: every error located at its line and
column in the YAML), compares results (:mod:`.compare`) and writes the report
(:mod:`.report`). A job's test form (each source reads only the rows the test gives, each
sink is captured) is made while it compiles (:mod:`flowc.analyze.test_form`); running on
Spark is
:mod:`flowc.runtime.user_tests`'s. Anchors: dbt's and SQLMesh's YAML unit tests, ksqlDB's
test runner.

A test file ``NAME.test.yaml`` beside ``NAME.flow``::

    tests:
      - name: two clicks in one minute
        given:
          clicks:                      # a source: rows, or batches of rows
            - [{user_id: a, url: x, ts: "2026-01-01 09:00:05"}]
            - [{user_id: a, url: y, ts: "2026-01-01 09:02:00"}]
        expect:
          per_user:                    # a sink: the rows it holds at the end
            - {user_id: a, clicks: 1}

May import: every stage up to the driver (it reads a compiled job); running the
tests is :mod:`flowc.runtime`'s, which imports this package.
"""

from flowc.usertest.compare import SinkResult, canonical, compare, diff_text, table
from flowc.usertest.discovery import test_files
from flowc.usertest.model import (
    PLAN_STAGES,
    TEST_SUFFIX,
    ExpectedRows,
    GivenRows,
    Row,
    TestFile,
    TestFileError,
    UserTest,
    Value,
)
from flowc.usertest.reader import load_test_file
from flowc.usertest.report import TestOutcome, TestRun

__all__ = [
    "PLAN_STAGES",
    "TEST_SUFFIX",
    "ExpectedRows",
    "GivenRows",
    "Row",
    "SinkResult",
    "TestFile",
    "TestFileError",
    "TestOutcome",
    "TestRun",
    "UserTest",
    "Value",
    "canonical",
    "compare",
    "diff_text",
    "load_test_file",
    "table",
    "test_files",
]
