"""DOT and Mermaid, written once for every graph stage.

Each stage (Transformation tree, StreamGraph, JobGraph) describes its graph as a
:class:`Diagram` of nodes and edges, which writes it in either language: quoting and
layout are the same for all stages.
"""

from __future__ import annotations

from enum import Enum

from flowc.fast_dataclass import dataclass


class Shape(Enum):
    """How a node is drawn: a box (an operator) or a rounded node (a virtual one). The
    value is DOT's shape; Mermaid draws a rounded node as a stadium."""

    BOX = "box"
    ROUNDED = "ellipse"


@dataclass(frozen=True, slots=True)
class Node:
    """``id`` names the node in the diagram's text; ``label`` is shown, quoted."""

    id: str
    label: str
    shape: Shape = Shape.BOX


@dataclass(frozen=True, slots=True)
class Edge:
    """From node id ``source`` to node id ``target``, with an optional one-line label."""

    source: str
    target: str
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Diagram:
    """A graph named ``name``, drawn left to right.

    With a ``default_shape`` the DOT output sets it once for all nodes and a node states
    its shape only where it differs; without one every node states its own.
    """

    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    default_shape: Shape | None = None

    def to_dot(self) -> str:
        lines = [f"digraph {dot_string(self.name)} {{", "  rankdir=LR;"]
        if self.default_shape is not None:
            lines.append(f"  node [shape={self.default_shape.value}];")
        for node in self.nodes:
            shape = "" if node.shape is self.default_shape else f"shape={node.shape.value}, "
            lines.append(f"  {node.id} [{shape}label={dot_string(node.label)}];")
        for edge in self.edges:
            label = "" if edge.label is None else f" [label={dot_string(edge.label)}]"
            lines.append(f"  {edge.source} -> {edge.target}{label};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_mermaid(self) -> str:
        lines = ["flowchart LR"]
        for node in self.nodes:
            label = mermaid_label(node.label)
            lines.append(
                f"  {node.id}[{label}]" if node.shape is Shape.BOX else f"  {node.id}([{label}])"
            )
        for edge in self.edges:
            arrow = "-->" if edge.label is None else f"-->|{_mermaid_text(edge.label)}|"
            lines.append(f"  {edge.source} {arrow} {edge.target}")
        return "\n".join(lines) + "\n"


def dot_string(text: str) -> str:
    """A DOT double-quoted string: backslashes, quotes and newlines escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


_MERMAID_ESCAPES = {
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "[": "#91;",
    "]": "#93;",
    "|": "#124;",
    "`": "#96;",
}


def mermaid_label(text: str) -> str:
    """A quoted Mermaid label: special characters as Mermaid's ``#name;`` entity codes, so
    no name can end the label or the node; line breaks become ``<br/>``."""
    return '"' + "<br/>".join(_mermaid_text(line) for line in text.split("\n")) + '"'


def _mermaid_text(text: str) -> str:
    """One line of a Mermaid label, its special characters as entity codes."""
    return "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)
