"""How Flink names and describes a chain of operators (a JobVertex).

StreamingJobGraphGenerator's createChainedName and its TREE vertex description, and
JsonPlanGenerator's escaping of that description. The chain is abstract here: operator
ids, each one's name, and the operators chained to each output (``chained``, in order),
so the rules stay independent of flowc's own graph classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html.entities import codepoint2name

__all__ = ["chained_name", "escape_description", "tree_description"]


def chained_name(
    head: int, name: Callable[[int], str], chained: Mapping[int, Sequence[int]]
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
        pieces.append(name(item))
        outputs = chained[item]
        if len(outputs) == 1:
            stack.append(outputs[0])
            stack.append(" -> ")
        elif outputs:
            todo: list[int | str] = [" -> ("]
            for index, target in enumerate(outputs):
                if index:
                    todo.append(", ")
                todo.append(target)
            todo.append(")")
            stack.extend(reversed(todo))
    return "".join(pieces)


def tree_description(
    head: int, name: Callable[[int], str], chained: Mapping[int, Sequence[int]]
) -> str:
    """Flink's TREE vertex description: ``:- `` / ``+- `` per chained output, each level
    indented three more characters (so a chain of n operators one after another describes
    in about 3n²/2 characters: flowc bounds how many chain so)."""
    lines = [name(head)]
    stack: list[tuple[int, str, bool]] = []  # (operator, its prefix, last of its siblings)
    below, prefix = chained[head], ""
    while True:
        for index in range(len(below) - 1, -1, -1):  # pre-order: the first child next
            stack.append((below[index], prefix, index == len(below) - 1))
        if not stack:
            break
        node, outer, last = stack.pop()
        lines.append(outer + ("+- " if last else ":- ") + name(node))
        below, prefix = chained[node], outer + ("   " if last else ":  ")
    return "\n".join(lines) + "\n"


def escape_description(text: str) -> str:
    """JsonPlanGenerator: commons-lang3 escapeHtml4 (the HTML 4 named entities, so not the
    apostrophe), then newlines as <br/> and backslashes as &#92;."""
    escaped = text.translate(_HTML4_ENTITIES)
    return escaped.replace("\n", "<br/>").replace("\\", "&#92;")


_HTML4_ENTITIES = {code: f"&{name};" for code, name in codepoint2name.items()}
