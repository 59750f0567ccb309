"""flowc diff's report: the state verdicts, the plan changes and a checkpoint's findings,
as text (diagnostics with source lines) or as one JSON document.
"""

from __future__ import annotations

from typing import Any

from flowc._version import __version__
from flowc.diagnostics import Diagnostic, Severity, render_text
from flowc.diff.changes import PlanDiff
from flowc.fast_dataclass import dataclass
from flowc.state.findings import Finding, StateComparison, Verdict, plural

#: The version of ``flowc diff --format json``'s document (docs/state.md, "flowc diff").
DIFF_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class CheckpointCheck:
    """``flowc diff --against DIR``: the new job checked against a checkpoint folder, as
    ``flowc run`` would check it before starting (flowc.runtime.state_guard)."""

    #: The checkpoint root given (as ``flowc run --checkpoint-dir``).
    root: str
    #: The job's folder under it that was checked; None when none was found.
    job_folder: str | None
    #: Errors (E0820: the state would be lost or corrupted) and warnings (E0821, E0822).
    diagnostics: tuple[Diagnostic, ...]
    #: What was (or could not be) checked, in a sentence.
    note: str

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "job_folder": self.job_folder,
            "ok": self.ok,
            "note": self.note,
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


@dataclass(frozen=True, slots=True)
class DiffReport:
    """Everything ``flowc diff OLD NEW`` says: state verdicts, plan changes, checkpoint."""

    old_file: str
    new_file: str
    old_job: str
    new_job: str
    state: StateComparison
    plan: PlanDiff
    checkpoint: CheckpointCheck | None = None

    @property
    def ok(self) -> bool:
        """Every state survives (unchanged, compatible, rescaled), here and in the
        checkpoint checked: exit code 0; else 1."""
        return self.state.ok and (self.checkpoint is None or self.checkpoint.ok)

    @property
    def changed(self) -> bool:
        """Anything at all differs between the two jobs' state or plans."""
        return (
            self.plan.changed
            or any(True for _ in self.state.findings())
            or any(
                (q.old is None) != (q.new is None)
                or any((o.old is None) != (o.new is None) for o in q.operators)
                for q in self.state.queries
            )
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "flowc_version": __version__,
            "schema_version": DIFF_SCHEMA_VERSION,
            "old": {"file": self.old_file, "job": self.old_job},
            "new": {"file": self.new_file, "job": self.new_job},
            "ok": self.ok,
            "changed": self.changed,
            "verdict": self.state.verdict.value,
            "state": [q.to_json() for q in self.state.queries],
            "plan": self.plan.to_json(),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
        }

    def to_text(self, sources: dict[str, str], color: bool = False) -> str:
        """The report as text: each finding about state as a diagnostic at the new line
        (with the old definition), a verdict per stateful operator, the plan changes, the
        checkpoint's findings, and the result."""
        paint = _Paint(color)
        out: list[str] = []
        if not self.changed and (self.checkpoint is None or not self.checkpoint.diagnostics):
            out.append(
                f"no changes: {self.new_file} keeps every plan and all state of {self.old_file}"
            )
            if self.checkpoint is not None:
                out.append(f"checkpoint: {self.checkpoint.note}")
            return "\n".join(out) + "\n"
        for query, finding in self.state.findings():
            if finding.verdict in (Verdict.INCOMPATIBLE, Verdict.RESCALED) or finding.warning:
                out.append(_finding_text(query, finding, sources, paint, self.new_file))
        out.extend(self._verdicts(paint))
        plan = self.plan.to_text()
        out.append(paint.bold("plan changes:") if plan else "plan changes: none")
        out.extend(plan)
        if self.checkpoint is not None:
            out.append("")
            title = paint.bold(f"checkpoint {self.checkpoint.root}:")
            out.append(f"{title} {self.checkpoint.note}")
            # What the checkpoint says that the comparison of the two files said already
            # (the checkpoint was written by OLD) is not repeated.
            shown = {
                (f.code, f.new.line if f.new is not None else None, f.message)
                for _, f in self.state.findings()
            }
            fresh = [
                d
                for d in self.checkpoint.diagnostics
                if (d.code, d.span.line, d.message) not in shown
            ]
            repeated = len(self.checkpoint.diagnostics) - len(fresh)
            if repeated:
                out.append(
                    f"  the checkpoint holds OLD's state: {plural(repeated, 'finding')} as above"
                )
            if fresh:
                out.append(render_text(fresh, sources, color).rstrip("\n"))
        out.append("")
        out.append(self._result(paint))
        return "\n".join(out) + "\n"

    def _verdicts(self, paint: _Paint) -> list[str]:
        lines = [paint.bold("state:")]
        if not self.state.queries:
            lines.append("  no queries")
        for query in self.state.queries:
            status = (
                "new query: starts with empty state"
                if query.old is None
                else "removed"
                if query.new is None
                else f"{plural(len(query.operators), 'stateful operator')}"
                if query.operators
                else "stateless"
            )
            lines.append(f"  query '{query.name}': {status}")
            for finding in query.findings:
                lines.append(f"    {_verdict_word(finding.verdict, paint)} {finding.message}")
            for operator in query.operators:
                where = operator.new if operator.new is not None else operator.old
                assert where is not None
                location = f"{where.location.file}:{where.location.line}"
                lines.append(
                    f"    {_verdict_word(operator.verdict, paint)} {operator.name}  ({location})"
                )
                for finding in operator.findings:
                    if finding.verdict is Verdict.COMPATIBLE:
                        lines.append(f"        {finding.message}")
        lines.append("")
        return lines

    def _result(self, paint: _Paint) -> str:
        counts: dict[Verdict, int] = {}
        for query in self.state.queries:
            for operator in query.operators:
                counts[operator.verdict] = counts.get(operator.verdict, 0) + 1
        shown = ", ".join(
            f"{counts[v]} {v.value}" for v in reversed(list(Verdict)) if counts.get(v)
        )
        tally = f" ({shown})" if shown else ""
        if self.ok:
            return paint.green("ok:") + f" every state survives the edit{tally}"
        lost = []
        if not self.state.ok:
            lost.append("the edit would lose or corrupt state")
        if self.checkpoint is not None and not self.checkpoint.ok:
            lost.append(f"the checkpoint in {self.checkpoint.root} cannot go on with the new job")
        return paint.red("not ok:") + f" {'; '.join(lost)}{tally}"


class _Paint:
    """ANSI styles as flowc's diagnostics use them, or none."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self.style(text, "1")

    def red(self, text: str) -> str:
        return self.style(text, "1;31")

    def yellow(self, text: str) -> str:
        return self.style(text, "1;33")

    def green(self, text: str) -> str:
        return self.style(text, "1;32")

    def blue(self, text: str) -> str:
        return self.style(text, "1;34")


def _verdict_word(verdict: Verdict, paint: _Paint) -> str:
    word = f"{verdict.value:<12}"
    if verdict is Verdict.INCOMPATIBLE:
        return paint.red(word)
    if verdict is Verdict.RESCALED:
        return paint.yellow(word)
    return word


def _finding_text(
    query: str, finding: Finding, sources: dict[str, str], paint: _Paint, new_file: str
) -> str:
    """One finding as a diagnostic: at the new definition (the old one when it is gone),
    the source line and a caret, the old definition, and the help."""
    error = finding.verdict is Verdict.INCOMPATIBLE
    severity = "error" if error else "warning"
    code = finding.code or ""
    message = finding.message
    old = finding.old
    if old is not None:
        # the state comparison ends an incompatible message with the old definition; shown below.
        was = f"was: {old.text} (line {old.line})"
        message = message.replace(f"; {was}", "").replace(f" ({was})", "")
    head = paint.red if error else paint.yellow
    lines = [head(f"{severity}[{code}]") + paint.bold(f": {message}")]
    at = finding.new if finding.new is not None else old
    if at is None:
        lines.append(f" = query '{query}'")
    else:
        gutter = " " * len(str(at.line))
        lines.append(f"{gutter}{paint.blue('-->')} {at.file}:{at.line}:{at.column}")
        text = sources.get(at.file)
        source_lines = text.split("\n") if text is not None else []
        if 1 <= at.line <= len(source_lines):
            shown = source_lines[at.line - 1].rstrip("\r").expandtabs(1)
            start = max(at.column - 1, 0)
            width = (
                max(at.end_column - at.column, 1)
                if at.end_line == at.line
                else max(len(shown) - start, 1)
            )
            lines.append(f"{gutter} {paint.blue('|')}")
            lines.append(f"{paint.blue(f'{at.line} |')} {shown}")
            caret = " " * min(start, len(shown)) + "^" * width
            lines.append(f"{gutter} {paint.blue('|')} {head(caret)}")
        if old is not None and finding.new is None:
            lines.append(f"{gutter} {paint.blue('=')} no longer in {new_file}")
        elif old is not None and finding.new is not None and old.text != finding.new.text:
            # (the same text: the message says what changed under it, a type or an input)
            lines.append(f"{gutter} {paint.blue('=')} was: {old.text} ({old.file}:{old.line})")
    if finding.help:
        gutter = " " * len(str(at.line)) if at is not None else ""
        lines.append(f"{gutter} {paint.blue('=')} {paint.bold('help')}: {finding.help}")
    return "\n".join(lines) + "\n"
