"""What the plan viewer must show of a program, found without the viewer's code: each
JOIN's condition (its text from the parser, whitespace collapsed) and the stream node it
runs in, each source's WATERMARK as the .flow text declares it (read with a regex)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import flowc
from flowc.program import DimensionJoinStep, JoinStep, Stream


@dataclass(frozen=True)
class ShownJoin:
    node: int  # its StreamGraph node (and transformation) id
    condition: str
    #: ON's last conjuncts from its first range comparison on (``x BETWEEN a AND b``,
    #: ``x >= y``...), as written; None where ON has none.
    time_range: str | None


def joins(job: flowc.CompiledJob) -> list[ShownJoin]:
    """Each JOIN of the job, in node order."""
    found: dict[int, ShownJoin] = {}
    streams: list[Stream] = [v.stream for v in job.program.views]
    streams += [i.stream for i in job.program.inserts]
    while streams:
        stream = streams.pop()
        for step in stream.steps:
            node = job.transformations.step_nodes.get(id(step))
            if isinstance(step, JoinStep | DimensionJoinStep) and node is not None:
                assert step.node.condition is not None
                condition = " ".join(step.node.condition.text.split())
                bound = re.search(r"\S+ (BETWEEN \S+ AND|[<>]=?) .*$", condition)
                found[node] = ShownJoin(node, condition, bound.group(0) if bound else None)
            streams.extend(step.inputs)
    return [found[n] for n in sorted(found)]


def declared_watermarks(text: str) -> dict[str, str]:
    """``WATERMARK FOR col AS expr`` of each CREATE SOURCE (or Flink's CREATE TABLE) of
    ``text`` that declares one on a line of its own, by source name."""
    found = {}
    for match in re.finditer(r"CREATE (?:SOURCE|TABLE) (\w+)\b(.*?)\bWITH\b", text, re.S):
        line = re.search(r"WATERMARK FOR (\w+) AS ([^)\n]*?)\s*\)?\s*$", match.group(2), re.M)
        if line is not None:
            found[match.group(1)] = f"WATERMARK FOR {line.group(1)} AS {line.group(2)}"
    return found


def vertex_of(job: flowc.CompiledJob, node: int) -> str:
    """The JobGraph vertex that runs stream node ``node``."""
    return next(
        v.id
        for v in job.job_graph.vertices.values()
        if any(op.node_id == node for op in v.operators)
    )
