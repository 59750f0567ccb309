"""The pass list's shape: each pass makes one stage of the job, typed, in the job's order,
and the compiler stays apart from the runtime."""

from __future__ import annotations

import ast as python_ast
import dataclasses
import typing
from pathlib import Path

from flowc import job as job_module
from flowc.job import CompiledJob, Stage
from flowc.passes import PASSES, Pass

COMPILER = Path(__file__).resolve().parent.parent / "compiler"


def _stage_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(CompiledJob) if not f.init]


def test_each_stage_is_made_by_one_pass_in_the_job_order() -> None:
    assert [p.name for p in PASSES] == _stage_fields()


def test_each_pass_returns_the_type_of_its_stage() -> None:
    # the module as locals too: the class's own ``ast`` slot would hide the ``ast`` module
    hints = typing.get_type_hints(CompiledJob, vars(job_module), vars(job_module))
    for compiler_pass in PASSES:
        assert isinstance(compiler_pass, Pass)
        stage: Stage[object] = compiler_pass.stage
        declared = typing.get_args(stage.__orig_class__)[0]  # type: ignore[attr-defined]
        assert declared == hints[stage.name], stage.name
        returned = typing.get_type_hints(compiler_pass.run, vars(job_module) | _pass_globals())
        assert returned["return"] == declared, compiler_pass.run.__name__


def _pass_globals() -> dict[str, object]:
    import flowc.passes

    return vars(flowc.passes)


def test_passes_module_has_no_any() -> None:
    tree = python_ast.parse((COMPILER / "passes.py").read_text(encoding="utf-8"))
    names = {n.id for n in python_ast.walk(tree) if isinstance(n, python_ast.Name)}
    attributes = {n.attr for n in python_ast.walk(tree) if isinstance(n, python_ast.Attribute)}
    assert "Any" not in names | attributes


def test_the_compiler_imports_nothing_from_the_runtime() -> None:
    """Only the command line joins the two, inside ``flowc run``'s own functions, so that
    compiling never loads the runtime or pyspark (imports for the type checker aside)."""
    offenders = []
    for path in sorted(COMPILER.rglob("*.py")):
        tree = python_ast.parse(path.read_text(encoding="utf-8"))
        tree.body = [n for n in tree.body if not _type_checking_only(n)]
        if path.stem.startswith("cli") or path.parent.name == "cli":  # the command line
            tree.body = [n for n in tree.body if not isinstance(n, python_ast.FunctionDef)]
        for node in python_ast.walk(tree):
            if isinstance(node, python_ast.ImportFrom) and (node.module or "").startswith(
                ("flowc.runtime", "pyspark")
            ):
                offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, python_ast.Import):
                offenders += [
                    f"{path.name}:{node.lineno}"
                    for alias in node.names
                    if alias.name.startswith(("flowc.runtime", "pyspark"))
                ]
    assert offenders == []


def _type_checking_only(node: python_ast.stmt) -> bool:
    """``if TYPE_CHECKING:``: imports for the type checker, never run."""
    return (
        isinstance(node, python_ast.If)
        and isinstance(node.test, python_ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


RUNTIME = COMPILER.parent / "runtime"


def _stage_edits(source: str) -> list[int]:
    """The lines of ``source`` that edit a compiled job: assign a stage (``x.<stage> =``
    on anything but ``self``, or ``setattr(x, "<stage>", ...)``) or copy a job to edit
    the copy (``copy.copy(job)``, ``replace(job, ...)``)."""
    stages = set(_stage_fields())
    lines = []
    for node in python_ast.walk(python_ast.parse(source)):
        if isinstance(node, python_ast.Assign | python_ast.AnnAssign | python_ast.AugAssign):
            targets = node.targets if isinstance(node, python_ast.Assign) else [node.target]
            lines += [
                node.lineno
                for target in targets
                if isinstance(target, python_ast.Attribute)
                and target.attr in stages
                and not (isinstance(target.value, python_ast.Name) and target.value.id == "self")
            ]
        if isinstance(node, python_ast.Call) and node.args:
            called = python_ast.unparse(node.func).rsplit(".", 1)[-1]
            first = node.args[0]
            if (
                called == "setattr"
                and len(node.args) > 1
                and isinstance(node.args[1], python_ast.Constant)
                and node.args[1].value in stages
            ) or (
                called in ("copy", "deepcopy", "replace")
                and isinstance(first, python_ast.Name)
                and "job" in first.id.lower()
            ):
                lines.append(node.lineno)
    return lines


def test_stages_are_stored_by_the_driver_only() -> None:
    """No module of the compiler or the runtime edits a compiled job: the job flowc runs
    (``flowc test``'s included) is the job the passes made; only the driver stores stages."""
    offenders = []
    for path in sorted([*COMPILER.rglob("*.py"), *RUNTIME.rglob("*.py")]):
        if path == COMPILER / "job.py":
            continue
        offenders += [
            f"{path.parent.name}/{path.name}:{line}"
            for line in _stage_edits(path.read_text(encoding="utf-8"))
        ]
    assert offenders == []


def test_the_guard_sees_each_kind_of_edit() -> None:
    """The guard above can fail: each way of editing a job is caught, a class's own
    attributes are not."""
    for edit in [
        "job.program = p",
        "runnable.spark_plan: object = p",
        "setattr(job, 'physical_plan', p)",
        "runnable = copy.copy(job)",
        "compile_test_form = dataclasses.replace(job, source='')",
    ]:
        assert _stage_edits(edit), edit
    assert _stage_edits("self.program = job.program\nplan = job.spark_plan") == []
