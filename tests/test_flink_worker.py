"""The session's PyFlink worker (tests/helpers/flink_worker.py) runs a script as
``FLINK_PYTHON -c SCRIPT ARGV...`` would: the same stdout, stderr and return code as a real
subprocess of the same Python, fresh globals per script, and a failure (the script's, a
dead worker's, an overrun timeout) fails the test with its text."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers.flink import FLINK_PYTHON, ask_flink, requires_flink
from tests.helpers.flink_worker import run_flink

pytestmark = requires_flink

#: Scripts without PyFlink (a real subprocess of each is cheap), with argv and stdin.
SCRIPTS = [
    (
        "import sys, json\nprint(json.dumps({'argv': sys.argv, 'name': __name__}))",
        ["a", "b c"],
        None,
    ),
    ("import sys\nprint(sys.stdin.read()[::-1])\nprint('to err', file=sys.stderr)", [], "héllo"),
    ("x = 1\n\ndef f():\n    raise ValueError('boom ' + str(x))\n\nf()", [], None),
    ("import sys\nprint('partial')\nsys.exit(3)", [], None),
    ("import sys\nsys.exit('bye')", [], None),
    ("raise SystemExit", [], None),
    ("def broken(:\n    pass", [], None),
    ("print(__file__)", [], None),
]


def _python() -> str:
    assert FLINK_PYTHON is not None, "FLOWC_FLINK_REQUIRED=1 but FLOWC_FLINK_PYTHON is not set"
    return FLINK_PYTHON


@pytest.mark.parametrize(("script", "args", "stdin"), SCRIPTS)
def test_worker_gives_what_a_subprocess_gives(
    script: str, args: list[str], stdin: str | None
) -> None:
    python = _python()
    real = subprocess.run(
        [python, "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    worker = run_flink(python, script, *args, stdin=stdin)
    assert (worker.returncode, worker.stdout, worker.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_globals_do_not_leak_between_scripts() -> None:
    python = _python()
    first = run_flink(python, "import sys\nleaked = 1\nprint(sorted(globals()))", "x")
    second = run_flink(python, "import sys\nprint(sorted(globals()))\nprint(sys.argv)")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert "leaked" in first.stdout
    assert "leaked" not in second.stdout
    assert second.stdout.splitlines()[-1] == "['-c']"


def test_flink_answers_as_json_and_fails_with_flinks_text() -> None:
    """A PyFlink script's JSON through ask_flink; Flink's own error fails the test with
    Flink's text; noise on the process's own stdout is not read as a reply."""
    script = """
import json, os, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
os.write(1, b'{"id": "noise"}\\n')
os.write(2, b'noise\\n')
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
n = json.loads(sys.argv[1])
rows = list(t.execute_sql(f"SELECT x * x FROM UNNEST(ARRAY{list(range(n))}) AS v(x)").collect())
print(json.dumps(sorted(r[0] for r in rows)))
"""
    assert ask_flink(script, 6) == [x * x for x in range(6)]
    bad = "from pyflink.table import EnvironmentSettings, TableEnvironment\n"
    bad += "TableEnvironment.create(EnvironmentSettings.in_batch_mode()).execute_sql('SELECT nope')"
    with pytest.raises(AssertionError, match="Column 'nope' not found"):
        ask_flink(bad, None)


def test_a_dead_worker_fails_the_test_and_the_next_request_starts_another() -> None:
    python = _python()
    pid = run_flink(python, "import os\nprint(os.getpid())").stdout
    with pytest.raises(pytest.fail.Exception, match="worker died"):
        run_flink(python, "import os, sys\nprint('last words', file=sys.__stderr__)\nos._exit(7)")
    again = run_flink(python, "import os, json\nprint(json.dumps(os.getpid()))")
    assert again.returncode == 0 and json.loads(again.stdout) != int(pid)


def test_an_overrun_fails_the_test_and_the_next_request_starts_another() -> None:
    python = _python()
    with pytest.raises(pytest.fail.Exception, match="longer than 1 s"):
        run_flink(python, "import time\ntime.sleep(60)", timeout=1)
    again = run_flink(python, "print('awake')")
    assert (again.returncode, again.stdout) == (0, "awake\n")
