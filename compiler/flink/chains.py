"""How Flink names and describes a chain of operators (a JobVertex).

StreamingJobGraphGenerator's createChainedName and its TREE vertex description, and
JsonPlanGenerator's escaping of that description. The chain is abstract here: nodes by
id, each with a ``name``, and each node's chained output edges (``chained``, in order),
so the rules stay independent of flowc's own graph classes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Protocol

from .hashing import StreamEdgeLike

__all__ = ["NamedNode", "chained_name", "escape_description", "tree_description"]


class NamedNode(Protocol):
    """What the rules need from a node: its name."""

    @property
    def name(self) -> str: ...


def chained_name(
    head: int, nodes: Mapping[int, NamedNode], chained: Mapping[int, Sequence[StreamEdgeLike]]
) -> str:
    """``A -> B`` for one chained output, ``A -> (B, C)`` for several (createChainedName),
    nested along the chain.

    Flink names every node so, which grows quadratically on long chains; this names the
    head only, piece by piece (no deep recursion, no quadratic copying).
    """
    pieces: list[str] = []
    stack: list[int | str] = [head]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            pieces.append(item)
            continue
        pieces.append(nodes[item].name)
        outputs = chained[item]
        if len(outputs) == 1:
            stack.append(outputs[0].target_id)
            stack.append(" -> ")
        elif outputs:
            todo: list[int | str] = [" -> ("]
            for index, edge in enumerate(outputs):
                if index:
                    todo.append(", ")
                todo.append(edge.target_id)
            todo.append(")")
            stack.extend(reversed(todo))
    return "".join(pieces)


def tree_description(
    head: int, nodes: Mapping[int, NamedNode], chained: Mapping[int, Sequence[StreamEdgeLike]]
) -> str:
    """Flink's TREE vertex description: ``:- `` / ``+- `` per chained output, each level
    indented three more characters (so a chain of n operators one after another describes
    in about 3n²/2 characters: flowc bounds how many chain so)."""
    lines = [nodes[head].name]
    stack: list[tuple[int, str, bool]] = []  # (operator, its prefix, last of its siblings)
    below, prefix = chained[head], ""
    while True:
        for index in range(len(below) - 1, -1, -1):  # pre-order: the first child next
            stack.append((below[index].target_id, prefix, index == len(below) - 1))
        if not stack:
            break
        node, outer, last = stack.pop()
        lines.append(outer + ("+- " if last else ":- ") + nodes[node].name)
        below, prefix = chained[node], outer + ("   " if last else ":  ")
    return "\n".join(lines) + "\n"


def escape_description(text: str) -> str:
    """JsonPlanGenerator: commons-lang3 escapeHtml4 (the HTML 4 named entities, so not the
    apostrophe), then newlines as <br/> and backslashes as &#92;."""
    escaped = text.translate(_html4_entities())
    return escaped.replace("\n", "<br/>").replace("\\", "&#92;")


@cache
def _html4_entities() -> dict[int, str]:
    """The table, made when a description is first escaped (for JSON): ``html.entities``
    holds HTML5's 2,000 entities as well, a millisecond of every start otherwise."""
    from html.entities import codepoint2name

    return {code: f"&{name};" for code, name in codepoint2name.items()}
