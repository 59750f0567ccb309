"""flowc's documented bounds (docs/limits.md), its memo caches and its hold on process state.

``flowc.compile`` runs in many threads of one process at once (data platforms embed it),
so nothing here is shared without a lock, no cache grows without a bound in bytes, and
the two process-wide settings a compilation needs changed (Python's recursion limit, the
cyclic collector's thresholds) are held by a count: the first compilation to enter
changes them, the last to leave puts back what it found, unless the application changed
them in between (then the application's values stay).

The bounds themselves are checked where the thing they bound is built; the diagnostic
codes (E0004, E0901-E0903, E0831-E0836) live there too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

# ---------------------------------------------------------------- the documented bounds

#: Characters of source text flowc compiles (E0901). A generated job of 10,000 operators
#: is 0.3 MB.
MAX_SOURCE_CHARS = 4 * 1024 * 1024
#: Characters of one string literal or quoted name (E0902).
MAX_LITERAL_CHARS = 1024 * 1024
#: Steps of a program (E0903): pipe steps, and the clauses of SQL queries. Checked while
#: parsing, so a program far past it stops before the costlier passes start. A job of
#: 10,000 operators has 12,500.
MAX_STEPS = 25_000
#: Tokens of SQL expressions and queries in a program (E0903), as sqlglot counts them (a
#: string literal is one): each becomes a node of a typed tree, and a tree costs about 1 KB
#: and 25-50 µs a node. Checked while parsing. A job of 10,000 operators has 30,000.
MAX_TOKENS = 100_000
#: Operators (nodes) of the StreamGraph (E0903).
MAX_STREAM_NODES = 25_000
#: Edges of the StreamGraph (E0903), and its virtual partition and side-output nodes: a
#: UNION ALL of the same input twice is two edges, so views each doubling the one before
#: would otherwise make 2^n of them from a file of n lines.
MAX_STREAM_EDGES = 50_000
#: Operators chained one after another in one task, a JobGraph vertex (E0903): Flink's
#: tree description of a task indents each operator by its depth in the chain, so it grows
#: with the square of that depth (a fan-out of many operators chained to one is not deep).
MAX_CHAINED_OPERATORS = 1_000

#: Nesting of one expression, query or type (E0004), counted on its tokens before any
#: recursive parser sees them: each open bracket ``(`` ``[`` ``{``, ``CASE``, the ``<`` of
#: ``ARRAY<``/``MAP<``/``STRUCT<``, each prefix operator (``-`` ``+`` ``~`` ``NOT``) and each
#: lambda arrow is one level while it is open. sqlglot's recursive descent spends about
#: twenty Python frames a level.
MAX_NESTING = 64
#: Type names called as functions nested in one another (E0004): ``date(date(x))`` is two.
#: sqlglot parses each first as a type, then again as a call, so every level doubles the
#: parse (measured: about 2.5x a level; 20 levels take hours).
MAX_TYPE_CALLS = 4
#: Depth of a parsed expression's tree (E0004), counted before any later pass walks it:
#: each node below another is one level deeper, except the links every pass walks in a
#: loop (``a + b + c``, ``a AND b OR c``). Chains that build a deep tree without nesting
#: (``x IS NULL = true IS NULL = ...``, ``x BETWEEN 1 AND 2 BETWEEN ...``, alternating
#: ``+``/``-``) stop here. The deepest pass after parsing (sqlglot's SQL generator) spends
#: at most five Python frames a level, so every pass after parsing stays under Python's
#: default recursion limit of 1,000 (the writers run after ``flowc.compile`` returns).
MAX_TREE_DEPTH = 160

# ---------------------------------------------------------------- memo caches

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
S = TypeVar("S")

#: What a memo cache costs per entry beyond its own estimate: the key's tuple, the
#: OrderedDict's link and slot, the (value, size) pair.
ENTRY_OVERHEAD = 200

#: Every cache made by :class:`BoundedCache`, by name (tests and the soak read their sizes).
CACHES: dict[str, BoundedCache[object, object]] = {}


class BoundedCache(Generic[K, V]):
    """A thread-safe memo with a budget in bytes, oldest entries evicted first.

    Sizes are the caller's estimate of what an entry keeps alive (see the callers), plus
    :data:`ENTRY_OVERHEAD`; an entry over ``max_entry_bytes`` is not kept at all. Reads
    (``get``) take no lock (a ``dict`` lookup is atomic under the GIL); writes and
    evictions do.
    """

    def __init__(self, name: str, max_bytes: int, max_entry_bytes: int) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.bytes = 0
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        #: The entry (value, size) kept for a key, or None: the dict's own ``get``, as a
        #: lookup is atomic under the GIL (and this is the hot path).
        self.get: Callable[[K], tuple[V, int] | None] = self._data.get
        CACHES[name] = self  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: K) -> bool:
        return key in self._data

    def values(self) -> list[V]:
        """The values kept, oldest first."""
        with self._lock:
            return [value for value, _ in self._data.values()]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` for ``key`` (replacing what was kept), unless it is too large."""
        size += ENTRY_OVERHEAD
        if size > self.max_entry_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, freed) = self._data.popitem(last=False)
                self.bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0


def cache_bytes() -> dict[str, int]:
    """Each memo cache's bytes by its own accounting."""
    return {name: cache.bytes for name, cache in CACHES.items()}


# ---------------------------------------------------------------- process-wide settings


class SharedSetting(Generic[S]):
    """A process-wide setting that compilations change while any of them runs.

    ``enter`` and ``leave`` pair up, in any threads; a thread may enter again while it
    holds (only its first entry counts). The first compilation to enter reads the setting
    and, if ``wanted`` says so, changes it; the last to leave restores what the first found
    if the setting is still what was set, and otherwise leaves the application's new value.
    """

    def __init__(
        self,
        read: Callable[[], S],
        write: Callable[[S], None],
        wanted: Callable[[S], S | None],
    ) -> None:
        self._read = read
        self._write = write
        self._wanted = wanted
        self._lock = threading.Lock()
        self._holders = 0
        self._found: S | None = None
        self._set: S | None = None
        self._local = threading.local()

    def enter(self) -> bool:
        """Hold the setting; False when this thread holds it already (then do not leave)."""
        local = self._local
        if getattr(local, "held", False):
            return False
        with self._lock:
            if self._holders == 0:
                found = self._read()
                value = self._wanted(found)
                if value is not None and value != found:
                    self._write(value)
                    self._found, self._set = found, value
                else:
                    self._found = self._set = None
            self._holders += 1
        local.held = True
        return True

    def leave(self) -> None:
        self._local.held = False
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._set is not None and self._found is not None:
                if self._read() == self._set:
                    self._write(self._found)
                self._found = self._set = None

    @property
    def holders(self) -> int:
        return self._holders
