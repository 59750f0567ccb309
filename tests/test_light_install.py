"""``pip install flowc`` is the compiler alone (docs/install.md): in a new virtualenv
with flowc installed from this checkout without the ``spark`` extra (but with ``lsp``),
pyspark is absent, the compiler's commands and API work, and the commands that run Spark
stop with E0817 at the job's first INSERT, exit 1, no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
#: What pip needs to build flowc: the rest of the checkout (tests, .venv, build/) stays out.
PROJECT_FILES = ("pyproject.toml", "README.md", "compiler", "runtime", "grammar")
#: What only running pulls in; the light install must have none of it.
RUNNING_ONLY = ("pyspark", "pandas", "pyarrow", "py4j", "google.protobuf")


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a virtualenv holding ``flowc[lsp]`` from this checkout."""
    base = tmp_path_factory.mktemp("light")
    source = base / "flowc"
    source.mkdir()
    for name in PROJECT_FILES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    environment = base / "venv"
    venv.create(environment, with_pip=True)
    done = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "install", "-q", f"{source}[lsp]"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return environment / "bin"


def _flowc(light: Path, *arguments: str, cwd: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(light / "flowc"), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_light_install_has_nothing_running_needs(light: Path) -> None:
    probe = (
        "import importlib.util, json, sys\n"
        "def found(m):\n"
        "    try:\n"
        "        return importlib.util.find_spec(m) is not None\n"
        "    except ModuleNotFoundError:\n"
        "        return False\n"
        "print(json.dumps({m: found(m) for m in sys.argv[1:]}))\n"
    )
    done = subprocess.run(
        [str(light / "python"), "-c", probe, *RUNNING_ONLY, "lark", "sqlglot", "pygls"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [m for m in RUNNING_ONLY if found[m]] == []
    assert found["lark"] and found["sqlglot"] and found["pygls"]  # the probe sees installs


def test_the_compilers_commands_work_without_spark(light: Path, tmp_path: Path) -> None:
    assert _flowc(light, "check", "wordcount.flow").returncode == 0
    compiled = _flowc(light, "compile", "nexmark_q4.flow", "--emit", "physical")
    assert compiled.returncode == 0, compiled.stderr
    assert "Spark realization" in compiled.stdout
    program = _flowc(light, "compile", "wordcount.flow", "--emit", "pyspark")
    assert program.returncode == 0 and "from pyspark" in program.stdout
    page = tmp_path / "plan.html"
    viewer = _flowc(
        light,
        "compile",
        "wordcount.flow",
        "--emit",
        "jobgraph",
        "--format",
        "html",
        "-o",
        str(page),
    )
    assert viewer.returncode == 0 and page.stat().st_size > 0, viewer.stderr
    assert _flowc(light, "fmt", "--check", "wordcount.flow").returncode == 0
    diff = _flowc(light, "diff", "wordcount.flow", "wordcount.flow")
    assert diff.returncode == 0, diff.stderr
    error = _flowc(light, "check", "errors/unknown_column.flow")
    assert error.returncode == 1 and "error[E0201]" in error.stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ("run", "wordcount.flow", "--available-now"),
        ("rescale", "wordcount.flow"),
        ("test", "wordcount.flow"),
    ],
)
def test_running_without_spark_says_what_to_install(
    light: Path, arguments: tuple[str, ...]
) -> None:
    done = _flowc(light, *arguments)
    assert done.returncode == 1, done.stdout + done.stderr
    # flowc test reports on standard output (its standard error is Spark's log).
    said = done.stdout + done.stderr
    assert f"error[E0817]: flowc {arguments[0]} needs Spark" in said
    assert " --> wordcount.flow:10:1\n" in said  # the first INSERT
    assert "pip install 'flowc[spark]'" in said
    assert "Traceback" not in said


def test_a_program_error_comes_before_the_missing_spark(light: Path, tmp_path: Path) -> None:
    shutil.copy2(EXAMPLES / "errors" / "unknown_column.flow", tmp_path / "job.flow")
    done = _flowc(light, "run", "job.flow", "--available-now", cwd=tmp_path)
    assert done.returncode == 1
    assert "error[E0201]" in done.stderr and "E0817" not in done.stderr


def test_the_api_compiles_and_generates_without_loading_pyspark(light: Path) -> None:
    script = (
        "import sys, flowc\n"
        "from flowc.spark.codegen import generate_pyspark\n"
        f"text = open({str(EXAMPLES / 'nexmark_q4.flow')!r}).read()\n"
        "job = flowc.compile(text, 'nexmark_q4.flow', for_spark=True)\n"
        "program = generate_pyspark(job)\n"
        "print(len(program) > 1000, 'pyspark' in sys.modules)\n"
    )
    done = subprocess.run(
        [str(light / "python"), "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]


def _frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_the_language_server_answers_without_spark(light: Path) -> None:
    requests = b"".join(
        _frame(m)
        for m in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}},
            },
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
            {"jsonrpc": "2.0", "method": "exit"},
        )
    )
    done = subprocess.run(
        [str(light / "flowc"), "lsp"], input=requests, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [
        json.loads(part.split(b"\r\n\r\n", 1)[1])
        for part in done.stdout.split(b"Content-Length: ")[1:]
    ]
    initialized = next(a for a in answers if a.get("id") == 1)
    assert initialized["result"]["serverInfo"]["name"] == "flowc"
    assert "hoverProvider" in initialized["result"]["capabilities"]
