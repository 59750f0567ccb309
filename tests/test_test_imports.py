"""No test module imports another: what tests share lives in tests/helpers/ (issue 26).

A test module imported by another runs its module code twice under two names and ties
the two files' tests together; the shared code belongs in a helper module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TEST_MODULES = frozenset(p.stem for p in TESTS.glob("test_*.py"))


def imported_test_modules(source: str) -> list[str]:
    """The test modules ``source`` imports, at any depth (a function's imports too), by
    any spelling: ``import test_x``, ``from test_x import``, ``from tests.test_x import``,
    ``from tests import test_x``, ``from . import test_x``, ``from .test_x import``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[-1] in TEST_MODULES and (len(parts) == 1 or parts[-2] in ("tests", "")):
                found.append(module.lstrip("."))
    return found


def test_no_module_under_tests_imports_a_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert not offenders, f"move the shared code into tests/helpers/: {offenders}"


def test_the_check_sees_every_spelling_of_an_import() -> None:
    """The check above can fail: each way of importing a test module is caught, and
    importing a helper is not."""
    assert {"test_run", "test_fuzz"} <= TEST_MODULES
    for spelling in [
        "import test_run",
        "from test_run import read_json_dir",
        "from tests.test_run import read_json_dir",
        "import tests.test_run",
        "from tests import test_run",
        "from . import test_run",
        "from .test_run import read_json_dir",
        "def f():\n    from test_fuzz import programs\n",
    ]:
        assert imported_test_modules(spelling), spelling
    for allowed in [
        "from tests.helpers.files import read_json_dir",
        "import flowc.runtime.run",
        "from fuzzing import seeded",
    ]:
        assert not imported_test_modules(allowed), allowed
