"""Deterministic output: byte-identical whatever the hash seed, the run, or the file's path.

plans.md: "the same input gives byte-identical output, whatever the hash seed or machine",
and language.md: operator ids depend on the operator's place in the graph only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stages import EXAMPLES, ROOT, STAGE_FORMATS

import flowc
from flowc.cli.main import main
from flowc.syntax.astdump import ast_to_json, ast_to_text

SEEDS = ("0", "1", "12345", "random")

#: Run in a fresh interpreter per seed: every example, stage and format through the CLI,
#: one combined document on stdout. It is also run in-process by the tests below.
DUMP_ALL = (
    f"STAGE_FORMATS = {STAGE_FORMATS!r}\n"
    + """
import contextlib, io, sys
from pathlib import Path
from flowc.cli.main import main

parts = []
for path in sorted(Path("examples").glob("*.flow")):
    for stage, formats in STAGE_FORMATS.items():
        for fmt in formats:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["compile", path.as_posix(), "--emit", stage, "--format", fmt])
            parts.append(f"=== {path.as_posix()} {stage} {fmt} exit {code}\\n")
            parts.append(out.getvalue())
sys.stdout.write("".join(parts))
"""
)


def _env(seed: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = seed
    return env


def _dump_in_process(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(DUMP_ALL, "<dump>", "exec"), {"__name__": "dump"})
    return out.getvalue()


def test_output_is_identical_under_every_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = {
        seed: subprocess.Popen(
            [sys.executable, "-c", DUMP_ALL],
            cwd=ROOT,
            env=_env(seed),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for seed in SEEDS
    }
    outputs: dict[str, bytes] = {}
    try:
        for seed, process in runs.items():
            stdout, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stderr.decode()
            outputs[seed] = stdout
    finally:
        for process in runs.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)

    reference = outputs[SEEDS[0]]
    # Not vacuous: every combination compiled cleanly and printed something.
    headers = [line for line in reference.decode().splitlines() if line.startswith("=== ")]
    combinations = sum(len(formats) for formats in STAGE_FORMATS.values())
    assert len(headers) == len(EXAMPLES) * combinations
    assert all(header.endswith(" exit 0") for header in headers), headers
    for part in reference.decode().split("=== ")[1:]:
        assert part.count("\n") > 1, f"empty output for {part.splitlines()[0]}"

    for seed, output in outputs.items():
        assert output == reference, f"PYTHONHASHSEED={seed} changes the output"
    # ...and the same as this very process produces (whatever its seed).
    assert _dump_in_process(monkeypatch).encode() == reference


@pytest.mark.parametrize("seed", SEEDS)
def test_python_dash_m_flowc_is_seed_independent(seed: str) -> None:
    """The real entry point, once per seed, on the richest example."""
    command = [
        sys.executable,
        "-m",
        "flowc",
        "compile",
        "examples/payments_routing.flow",
        "--emit",
        "jobgraph",
        "--format",
        "json",
    ]
    result = subprocess.run(command, cwd=ROOT, env=_env(seed), capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
    job = flowc.compile(
        (ROOT / "examples" / "payments_routing.flow").read_text(encoding="utf-8"),
        "examples/payments_routing.flow",
    )
    assert result.stdout == job.job_graph.to_json().encode()


# ------------------------------------------------------------------ in-process


def _render_all(job: flowc.CompiledJob) -> dict[str, str]:
    """Every stage in every format, through the public API."""
    rendered = {"ast.text": ast_to_text(job.ast), "ast.json": ast_to_json(job.ast)}
    stages = {
        "transformations": job.transformations,
        "streamgraph": job.stream_graph,
        "jobgraph": job.job_graph,
        "physical": job.physical_plan,
    }
    for stage, ir in stages.items():
        for fmt in STAGE_FORMATS[stage]:
            rendered[f"{stage}.{fmt}"] = getattr(ir, f"to_{fmt}")()
    return rendered


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_compiling_twice_in_one_process_gives_identical_output(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    filename = path.relative_to(ROOT).as_posix()
    first = _render_all(flowc.compile(text, filename))
    # Compile every other example in between: no counter or cache may leak across jobs
    # (Flink's own transformation counter is process-global; flowc's must not be).
    for other in EXAMPLES:
        flowc.compile(other.read_text(encoding="utf-8"), other.name)
    second = _render_all(flowc.compile(text, filename))
    assert second == first


def test_cli_output_is_identical_when_run_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _dump_in_process(monkeypatch) == _dump_in_process(monkeypatch)


# ------------------------------------------------------------------ file names


def _without_span_files(value: Any) -> Any:
    """The JSON with every span's (and the AST's) ``file`` blanked."""
    if isinstance(value, dict):
        return {k: "<file>" if k == "file" else _without_span_files(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_span_files(v) for v in value]
    return value


def _span_files(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["file"]} if isinstance(value.get("file"), str) else set()
        return found.union(*(_span_files(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_span_files(v) for v in value))
    return set()


def _ids(job: flowc.CompiledJob) -> dict[str, Any]:
    """Every operator, vertex and data set id of a job, in plan order."""
    stream = json.loads(job.stream_graph.to_json())
    graph = json.loads(job.job_graph.to_json())
    physical = json.loads(job.physical_plan.to_json())
    return {
        "operators (streamgraph)": [n["operator_id"] for n in stream["nodes"]],
        "vertices": [v["id"] for v in graph["nodes"]],
        "operators (jobgraph)": [[op["id"] for op in v["operators"]] for v in graph["nodes"]],
        "inputs": [[(i["id"], i["dataset"]) for i in v.get("inputs", [])] for v in graph["nodes"]],
        "physical": [v["id"] for v in physical["vertices"]],
        "regions": physical["pipelined_regions"],
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_ids_do_not_depend_on_the_file_name(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    here = flowc.compile(text, path.relative_to(ROOT).as_posix())
    renamed = flowc.compile(text, "/somewhere/else/entirely/renamed.flow")
    assert _ids(renamed) == _ids(here)
    assert all(_ids(here).values())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_only_span_files_differ_between_paths(path: Path) -> None:
    """Same file name in another folder (relative vs absolute): only spans' ``file`` changes."""
    text = path.read_text(encoding="utf-8")
    relative = path.relative_to(ROOT).as_posix()
    absolute = f"/elsewhere/deeper/{path.name}"
    a = _render_all(flowc.compile(text, relative))
    b = _render_all(flowc.compile(text, absolute))
    for key in a:
        if key.endswith(".json"):
            doc_a, doc_b = json.loads(a[key]), json.loads(b[key])
            assert _without_span_files(doc_b) == _without_span_files(doc_a), key
            assert _span_files(doc_a) == {relative}, key
            assert _span_files(doc_b) == {absolute}, key
        else:
            assert b[key] == a[key], key


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_with_job_name_set_only_span_files_differ(path: Path) -> None:
    """The default job name is the file's stem; with ``job.name`` set, the stem is irrelevant
    too, down to the job id."""
    text = "SET job.name = 'fixed';\n" + path.read_text(encoding="utf-8")
    a = _render_all(flowc.compile(text, "one.flow"))
    b = _render_all(flowc.compile(text, "dir/two.flow"))
    assert json.loads(a["jobgraph.json"])["name"] == "fixed"
    for key in a:
        if key.endswith(".json"):
            doc_a, doc_b = json.loads(a[key]), json.loads(b[key])
            assert _without_span_files(doc_b) == _without_span_files(doc_a), key
        else:
            assert b[key] == a[key], key


def test_cli_paths_only_change_span_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI: a relative and an absolute path to the same file."""
    source = ROOT / "examples" / "payments_routing.flow"
    copy = tmp_path / source.name
    copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    documents = []
    for argument in (source.name, str(copy)):
        assert main(["compile", argument, "--emit", "jobgraph", "--format", "json"]) == 0
        documents.append(json.loads(capsys.readouterr().out))
    relative, absolute = documents
    assert _span_files(relative) == {source.name}
    assert _span_files(absolute) == {str(copy)}
    assert _without_span_files(absolute) == _without_span_files(relative)
