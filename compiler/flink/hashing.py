"""Flink's StreamGraphHasherV2: deterministic operator and vertex IDs.

Flink keys savepoint state by these IDs, so flowc must produce byte-identical
hashes for a job to restore into (or from) a real Flink deployment. The graph
is abstract here (int node ids, edges exposing ``source_id``/``target_id``) so
the rule stays independent of flowc's own graph classes.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol, TypeVar

from .keygroups import FlinkRuleError
from .murmur import murmur3_x64_128

__all__ = ["EdgeRef", "StreamEdgeLike", "hash_stream_nodes", "to_hex"]

_INT_LE = struct.Struct("<i")
#: Each byte value times 37, modulo 256 (Java's byte arithmetic in the hash's input mix).
_TIMES_37 = bytes((value * 37) & 0xFF for value in range(256))


class StreamEdgeLike(Protocol):
    """What the hasher needs from an edge: its two endpoints (like Flink's StreamEdge)."""

    @property
    def source_id(self) -> int: ...

    @property
    def target_id(self) -> int: ...


class EdgeRef(NamedTuple):
    """A minimal concrete edge for callers (and tests) without an edge class of their own."""

    source_id: int
    target_id: int
    type_number: int = 0


E = TypeVar("E", bound=StreamEdgeLike)


def to_hex(hash_bytes: bytes) -> str:
    """Render a hash the way Flink prints an AbstractID: lowercase hex, bytes in order."""
    return hash_bytes.hex()


def _user_hash(uid: str, seen: set[bytes]) -> bytes:
    """Hash a user-specified uid, refusing one that equals any hash computed so far."""
    digest = murmur3_x64_128(uid.encode("utf-8"))
    if digest in seen:
        raise FlinkRuleError(
            f'Hash collision on user-specified ID "{uid}". '
            "Most likely cause is a non-unique ID. Please check that all IDs "
            "specified via `uid(String)` are unique."
        )
    return digest


def _deterministic_hash(
    node_edges_out: Sequence[E],
    node_edges_in: Sequence[E],
    hashes: Mapping[int, bytes],
    is_chainable: Callable[[E], bool],
) -> bytes:
    """Hash a uid-less node from its traversal position, chaining and input hashes.

    The position (number of nodes hashed so far) stands in for the node id so
    that IDs survive renumbering; chainable outputs are counted so that changing
    the chaining changes the ID; inputs are mixed in so that upstream changes
    propagate.
    """
    position = _INT_LE.pack(len(hashes))
    chained = sum(1 for edge in node_edges_out if is_chainable(edge))
    digest = murmur3_x64_128(position * (1 + chained))
    for edge in node_edges_in:
        # Flink's byte loop ``digest[j] = digest[j] * 37 ^ upstream[j]`` (as bytes) for all
        # sixteen bytes at once: each byte times 37 by a table, then one XOR of the two as
        # integers (a byte's XOR stays in its byte).
        mixed = int.from_bytes(digest.translate(_TIMES_37), "little")
        mixed ^= int.from_bytes(hashes[edge.source_id], "little")
        digest = mixed.to_bytes(16, "little")
    return digest


def hash_stream_nodes(
    sources: Iterable[int],
    out_edges: Mapping[int, Sequence[E]],
    in_edges: Mapping[int, Sequence[E]],
    uids: Mapping[int, str | None],
    is_chainable: Callable[[E], bool],
) -> dict[int, bytes]:
    """Return the 16-byte StreamGraphHasherV2 hash of every node reachable from ``sources``.

    ``out_edges[n]`` and ``in_edges[n]`` must be in Flink's edge creation order
    (missing keys mean no edges); ``uids[n]`` is the user uid or ``None``;
    ``is_chainable`` must already include the "chaining enabled" switch.
    Traversal is breadth-first from the sources in ascending id; a uid-less node
    whose inputs are not all hashed yet is postponed until another parent
    reaches it. The result is in hashing order. Nodes never reached, or only
    reachable through a cycle, are absent.
    """
    no_edges: Sequence[E] = ()
    hashes: dict[int, bytes] = {}
    ordered_sources = sorted(sources)
    visited = set(ordered_sources)
    remaining = deque(ordered_sources)
    seen: set[bytes] = set()  # the hashes' values, for Flink's collision check in O(1)
    # Flink checks all of a node's inputs each time the node comes up, which is quadratic in
    # its inputs when they are hashed one at a time; instead, from its first try, a node
    # counts its inputs whose source has no hash yet, and each source hashed counts down.
    waiting: dict[int, int] = {}
    watchers: dict[int, list[int]] = {}  # source -> nodes waiting for it, one per edge
    while remaining:
        node = remaining.popleft()
        node_in = in_edges.get(node, no_edges)
        node_out = out_edges.get(node, no_edges)
        uid = uids.get(node)
        if uid is not None:
            hashes[node] = _user_hash(uid, seen)
        else:
            pending = waiting.get(node)
            if pending is None:
                pending = 0
                for edge in node_in:
                    if edge.source_id not in hashes:
                        pending += 1
                        watchers.setdefault(edge.source_id, []).append(node)
                waiting[node] = pending
            if pending:
                visited.discard(node)
                continue
            hashes[node] = _deterministic_hash(node_out, node_in, hashes, is_chainable)
        seen.add(hashes[node])
        for waiter in watchers.pop(node, ()):
            waiting[waiter] -= 1
        for edge in node_out:
            child = edge.target_id
            if child not in visited:
                visited.add(child)
                remaining.append(child)
    return hashes
