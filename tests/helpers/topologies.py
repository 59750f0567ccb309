"""Generated .flow topologies with the hints the generator gave each operator."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

import flowc
from flowc.job import CompiledJob

PARTITION_STEPS = [
    "REBALANCE",
    "RESCALE",
    "SHUFFLE",
    "BROADCAST",
    "GLOBAL",
    "FORWARD",
    "KEY BY k",
    "PARTITION BY k % 3",
]


CHAINING = {None: "ALWAYS", "always": "ALWAYS", "new_chain": "HEAD", "never": "NEVER"}


@dataclass
class Hint:
    parallelism: int | None = None
    max_parallelism: int | None = None
    group: str | None = None
    chaining: str | None = None
    uid: str | None = None


@dataclass
class Program:
    """A generated program and, per operator name, the hints the generator gave it."""

    batch: bool
    chaining: bool
    parallelism: int
    max_parallelism: int | None
    lines: list[str] = field(default_factory=list)
    hints: dict[str, Hint] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)  # sources and views some query reads

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Names:
    def __init__(self) -> None:
        self.count = 0

    def next(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


@st.composite
def hints(draw: st.DrawFn, names: _Names, default_parallelism: int) -> Hint:
    # a max_parallelism hint must not be below the operator's parallelism (E0305)
    max_parallelism = [8, 13] if default_parallelism <= 5 else [128, 200]
    return Hint(
        parallelism=draw(st.one_of(st.none(), st.none(), st.integers(1, 5))),
        max_parallelism=draw(st.sampled_from([None, None, None, *max_parallelism])),
        group=draw(st.sampled_from([None] * 6 + ["a", "b"])),
        chaining=draw(st.sampled_from([None] * 6 + ["always", "new_chain", "never"])),
        uid=names.next("uid-") if draw(st.integers(0, 5)) == 0 else None,
    )


def render(hint: Hint, name: str | None) -> list[str]:
    parts = []
    if name is not None:
        parts.append(f"name = '{name}'")
    if hint.parallelism is not None:
        parts.append(f"parallelism = {hint.parallelism}")
    if hint.max_parallelism is not None:
        parts.append(f"max_parallelism = {hint.max_parallelism}")
    if hint.group is not None:
        parts.append(f"slot_sharing_group = '{hint.group}'")
    if hint.chaining is not None:
        parts.append(f"chaining = '{hint.chaining}'")
    if hint.uid is not None:
        parts.append(f"uid = '{hint.uid}'")
    return parts


@st.composite
def steps(draw: st.DrawFn, program: Program, names: _Names, streams: list[str]) -> list[str]:
    """0-4 pipe steps; every operator step is named after itself so it can be traced."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["select", "where", "partition", "aggregate", "union"]))
        if kind == "partition":
            out.append(draw(st.sampled_from(PARTITION_STEPS)))
            continue
        if kind == "union":
            others = draw(st.lists(st.sampled_from(streams), min_size=1, max_size=2))
            program.read.update(others)
            out.append("UNION ALL " + ", ".join(others))
            continue
        name = names.next("n")
        hint = draw(hints(names, program.parallelism))
        program.hints[name] = hint
        options = f" WITH ({', '.join(render(hint, name))})"
        body = {
            "select": "SELECT k, v",
            "where": "WHERE v > 0",
            "aggregate": "KEY BY k |> AGGREGATE sum(v) AS v",
        }[kind]
        out.append(body + options)
    return out


def pipe(origin: str, body: list[str]) -> str:
    return " |> ".join([f"FROM {origin}", *body])


@st.composite
def programs(draw: st.DrawFn) -> Program:
    names = _Names()
    # now and then a parallelism above 85, whose default max parallelism is 256, not 128
    parallelism = draw(st.sampled_from([1, 2, 3, 4] * 3 + [90]))
    program = Program(
        batch=draw(st.sampled_from([False, False, False, True])),
        chaining=draw(st.sampled_from([True, True, True, False])),
        parallelism=parallelism,
        max_parallelism=draw(st.sampled_from([None, None, 16] if parallelism <= 4 else [None])),
    )
    lines = program.lines
    lines.append(f"SET parallelism = {program.parallelism};")
    if program.max_parallelism is not None:
        lines.append(f"SET max_parallelism = {program.max_parallelism};")
    if not program.chaining:
        lines.append("SET chaining = false;")
    if program.batch:
        lines.append("SET execution.mode = batch;")
    streams: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        source = names.next("s")
        hint = draw(hints(names, program.parallelism))
        program.hints[f"Source: {source}"] = hint
        options = ["connector = 'datagen'", *render(hint, None)]
        if program.batch:
            options.append("number_of_rows = 10")
        lines.append(f"CREATE SOURCE {source} (k BIGINT, v BIGINT) WITH ({', '.join(options)});")
        streams.append(source)
    views: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        view = names.next("v")
        origin = draw(st.sampled_from(streams))
        program.read.add(origin)
        lines.append(f"CREATE VIEW {view} AS {pipe(origin, draw(steps(program, names, streams)))};")
        streams.append(view)
        views.append(view)
    # every view is read by 1-3 INSERTs (a fork when more than one); sources maybe directly
    readers = [(v, draw(st.integers(1, 3))) for v in views]
    if not views or draw(st.booleans()):
        readers.append((draw(st.sampled_from(streams)), 1))
    for stream, count in readers:
        for _ in range(count):
            sink = names.next("o")
            hint = draw(hints(names, program.parallelism))
            program.hints[f"Sink: {sink}"] = hint
            options = ["connector = 'console'", *render(hint, None)]
            lines.append(f"CREATE SINK {sink} WITH ({', '.join(options)});")
            body = draw(steps(program, names, streams))
            program.read.add(stream)
            lines.append(f"INSERT INTO {sink} {pipe(stream, body)};")
    return program


def compile_or_reject(program: Program) -> CompiledJob:
    """FORWARD between different parallelisms is the one error the generator may produce."""
    try:
        return flowc.compile(program.text, "gen.flow")
    except flowc.CompileError as error:
        codes = {d.code for d in error.diagnostics if d.severity is flowc.Severity.ERROR}
        if codes == {"E0310"}:
            assume(False)
        raise


SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
