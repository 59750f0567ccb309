"""``flowc diff OLD NEW``: what an edit does to a job's state and plans, and with
``--against DIR`` whether NEW can go on from the checkpoints there."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flowc.cli.input import compile_source, read_source
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    print_diagnostics,
    use_color,
    write_stderr,
    write_stdout,
)
from flowc.diagnostics import CompileError, Diagnostic, Severity
from flowc.diff import CheckpointCheck, DiffReport, diff_plans
from flowc.errorcodes import Code
from flowc.spark.spark_plan import checkpoint_segment
from flowc.state import compare, describe_state

if TYPE_CHECKING:
    from flowc.job import CompiledJob


def diff(args: argparse.Namespace) -> int:
    """``flowc diff OLD NEW``: whether NEW can go on from OLD's state, and how its plans
    changed (docs/state.md, "flowc diff"). Never imports pyspark."""

    sources: dict[str, str] = {}
    unreadable = False
    for path in (args.old, args.new):
        try:
            sources[path] = read_source(path)
        except UsageError as error:
            write_stderr(f"error: {error}\n")
            unreadable = True
    if unreadable:
        return EXIT_USAGE
    jobs: list[CompiledJob] = []
    errors: list[Diagnostic] = []
    for path in (args.old, args.new):
        try:
            jobs.append(compile_source(args, sources[path], path))
        except CompileError as error:
            errors.extend(error.diagnostics)
    if errors:
        print_diagnostics(errors, sources, args.format, args.color)
        return EXIT_ERRORS
    old, new = jobs
    report = DiffReport(
        old_file=args.old,
        new_file=args.new,
        old_job=old.program.settings.job_name,
        new_job=new.program.settings.job_name,
        state=compare(describe_state(old), describe_state(new)),
        plan=diff_plans(old, new),
        checkpoint=diff_against(args, old, new) if args.against is not None else None,
    )
    if args.format == "json":
        write_stdout(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        write_stdout(report.to_text(sources, use_color(args.color, sys.stdout)))
    return EXIT_OK if report.ok else EXIT_ERRORS


def diff_against(args: argparse.Namespace, old: CompiledJob, new: CompiledJob) -> CheckpointCheck:
    """``--against DIR``: NEW checked against the job's checkpoints under DIR, as ``flowc
    run --checkpoint-dir DIR`` checks before Spark starts (flowc.runtime.state_guard, which
    reads small files and imports no pyspark).

    The job's folder is ``DIR/<job name>``. A job named after its file (no SET job.name)
    is one job in two files, so when ``DIR/<new name>`` is not there, ``DIR/<old name>``
    is checked, with NEW compiled under that name."""
    from flowc.runtime.state_guard import guard_state

    root = args.against
    if not os.path.isdir(root):
        raise UsageError(f"--against {root}: no such folder")
    base = os.path.abspath(
        args.base_dir if args.base_dir is not None else str(Path(args.new).parent)
    )
    new_name = new.program.settings.job_name
    old_name = old.program.settings.job_name
    job = new
    folder = os.path.join(root, checkpoint_segment(new_name))
    defaulted = new_name == (Path(args.new).stem or "job")
    if not os.path.isdir(folder):
        old_folder = os.path.join(root, checkpoint_segment(old_name))
        if not os.path.isdir(old_folder):
            return CheckpointCheck(
                root,
                None,
                (),
                f"no checkpoint of job '{new_name}' here ({folder} is not there): every query "
                "would start with empty state, and nothing was checked",
            )
        if not defaulted:
            renamed = Diagnostic(
                Code.E0820,
                Severity.ERROR,
                f"the job is now named '{new_name}', and its checkpoints would go to {folder}: "
                f"the state of job '{old_name}' in {old_folder} would be left behind",
                new.program.span,
                "keep the job's name (SET job.name), or start over on purpose",
            )
            return CheckpointCheck(root, old_folder, (renamed,), "the job was renamed")
        try:
            job = compile_source(args, new.source, new.file, overrides={"job.name": old_name})
        except CompileError as error:
            return CheckpointCheck(root, old_folder, error.diagnostics, "not checked")
        folder = old_folder
    try:
        guard = guard_state(job, checkpoint_root=root, base_dir=base, reset_state=(), repair=False)
    except CompileError as error:
        return CheckpointCheck(root, folder, error.diagnostics, _checked(job, folder))
    return CheckpointCheck(root, folder, tuple(guard.warnings), _checked(job, folder))


def _checked(job: CompiledJob, folder: str) -> str:
    """Which of the job's queries had a checkpoint in ``folder``."""
    if job.spark_plan.batch:
        return "a batch job keeps no checkpoint: nothing to go on from"
    found = [
        q.name
        for q in job.spark_plan.queries
        if os.path.isdir(os.path.join(folder, q.checkpoint[1], "offsets"))
    ]
    if not found:
        return f"{folder} holds no checkpoint of this job's queries: nothing to go on from"
    return f"checked {folder} for {', '.join(repr(name) for name in found)}"
