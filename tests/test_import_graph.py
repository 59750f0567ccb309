"""flowc's modules import each other without cycles, and import inside functions only where
that keeps pyspark or a heavy, optional library out of ``flowc compile``.

A cycle makes the order in which modules happen to be imported decide whether a name
exists yet, and ties every module on it to all the others; an import moved into a function
hides a cycle from Python without removing it. So the graph here counts both: every
``import`` of a module of the ``flowc`` distribution (``compiler/`` → ``flowc``,
``runtime/`` → ``flowc.runtime``, ``grammar/`` → ``flowc.grammar``, as pyproject.toml maps
them), at module level and inside functions, read with :mod:`ast`. Only imports under
``if TYPE_CHECKING:`` are left out: they never run.

An edge goes to the module named. ``from flowc.x import y`` goes to ``flowc.x.y`` when that
is a module, else to ``flowc.x`` (the names of its ``__init__``). Importing ``flowc.x.y``
from outside package ``flowc.x`` also runs ``flowc/x/__init__.py``, which is an edge too;
the root package ``flowc`` is left out of that rule only (every module is inside it, and
``from flowc import ast``, a submodule, needs nothing of its ``__init__``), while
``from flowc import __version__`` is an edge to ``flowc``, as it reads the ``__init__``.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import deque
from pathlib import Path

from tests.helpers.import_graph import (
    ROOT,
    Edge,
    Import,
    graph,
    imports,
    module_of,
    modules,
    packages,
)

#: Every import inside a function: (importing module, imported module) → why it waits.
#: A function-level import of a module of flowc, or of anything not listed here, fails
#: ``test_lazy_imports_are_listed``: move it to the top of the module and break the cycle it
#: would make instead. ``*`` stands for any module outside flowc.
_RUNTIME = "flowc.runtime drives Spark (the only package importing pyspark): never compiling"
_LARK = "lark builds a parser only to report a syntax error (the LALR tables parse the rest)"
LAZY_ALLOWED: dict[tuple[str, str], str] = {
    ("flowc.spark.generated_runtime", "*"): "the functions' text is copied into the generated "
    "program (flowc.spark.codegen), which runs where flowc is not installed: their imports go "
    "with them",
    ("flowc.syntax.lalr_build", "*"): "builds grammar/tables.py from Lark's grammar "
    "(python -m flowc.syntax.lalr), never while compiling",
    ("flowc.syntax.ast_builder", "lark"): _LARK,
    ("flowc.syntax.parser", "lark.exceptions"): _LARK,
    ("flowc.syntax.syntax_errors", "lark.exceptions"): _LARK,
    ("flowc.job", "flowc.spark.codegen"): "CompiledJob.pyspark_program: the code generator "
    "(which types its input as a CompiledJob) loads when a program is asked for, not at "
    "import flowc",
    ("flowc.viewer", "grandalf.graphs"): "the plan viewer's layout, only for --format html",
    ("flowc.viewer", "grandalf.layouts"): "the plan viewer's layout, only for --format html",
    ("flowc.diagnostics", "rich.console"): "rich only to colour diagnostics on a terminal",
    ("flowc.diagnostics", "rich.text"): "rich only to colour diagnostics on a terminal",
    ("flowc.runtime.run", "rich.table"): "rich only for a run's live progress table",
    ("flowc.runtime.run", "rich.console"): "rich only for a run's live progress table",
    ("flowc.runtime.run", "rich.live"): "rich only for a run's live progress table",
    ("flowc.runtime.failures", "pyspark.errors"): "pyspark only once Spark has failed",
    ("flowc.runtime.run", "pyspark"): "pyspark's gateway only once Spark has failed, to see "
    "whether its JVM ended (E0807)",
    ("flowc.runtime.failures", "py4j.protocol"): "py4j only once Spark has failed",
    ("flowc.runtime.function_list", "pyspark"): "a maintainer's tool that asks Spark",
    ("flowc.runtime.function_list", "pyspark.sql"): "a maintainer's tool that asks Spark",
    ("flowc.cli.compile", "flowc.spark.codegen"): "the PySpark code generator (six modules) "
    "only for --emit pyspark or all: flowc compile of a plan does without it",
    ("flowc.cli.lsp", "flowc.lsp.server"): "pygls, an optional dependency (flowc[lsp])",
    ("flowc.cli.compile", "flowc.viewer"): "the plan viewer only for --format html: every "
    "other flowc check or compile does without it (1 ms a start)",
    ("flowc.cli.main", "platform"): "only for a crash report (1 ms of every start)",
    ("flowc.flink.chains", "html.entities"): "only to escape a JobGraph description for JSON "
    "(1 ms of every start)",
    ("flowc", "importlib.metadata"): "sqlglot imports it for dialect plugins flowc never "
    "asks for: the real module only when its stand-in is used (10 ms of import flowc)",
    ("flowc.cli.run", "flowc.runtime.failures"): _RUNTIME,
    ("flowc.cli.run", "flowc.runtime.run"): _RUNTIME,
    ("flowc.cli.run", "flowc.runtime.rescale"): _RUNTIME,
    ("flowc.cli.test", "flowc.runtime.failures"): _RUNTIME,
    ("flowc.cli.test", "flowc.runtime.run"): _RUNTIME,
    ("flowc.cli.test", "flowc.runtime.user_tests"): _RUNTIME,
    ("flowc.cli.diff", "flowc.runtime.state_guard"): _RUNTIME,
    ("flowc.cli.run", "flowc.runtime.warm"): _RUNTIME,
    ("flowc.cli.test", "flowc.runtime.warm"): _RUNTIME,
    ("flowc.cli.spark", "flowc.runtime.warm"): _RUNTIME,
    ("flowc.runtime.run", "pyspark.sql"): "the warm Spark: a Connect session asked which "
    "settings it can take, or whether a local session runs",
    ("flowc.runtime.warm_server", "pyspark.sql"): "the warm Spark's server process, never "
    "imported by flowc itself (python -m)",
    **{
        ("flowc.cli.main", f"flowc.cli.{command}"): "a command's module loads when it runs: flowc "
        "check does not load the state code, PyYAML or the viewer (about 100 ms a start)"
        for command in ("compile", "run", "diff", "fmt", "test", "spark", "lsp")
    },
}


def cycles(edges: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's, without
    recursion), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle(component: list[str], edges: dict[str, dict[str, Edge]]) -> list[str]:
    """One shortest cycle through the component's first module, as modules in order."""
    members = set(component)
    start = component[0]
    came: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges[node]):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [*reversed(path), start]
            if nxt in members and nxt not in came:
                came[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")


def describe(cycle: list[str], edges: dict[str, dict[str, Edge]], known: dict[str, Path]) -> str:
    """``a (compiler/a.py:3) → b (…) → a``: each step with the line of its import."""
    steps = [cycle[0]]
    for source, target in itertools.pairwise(cycle):
        edge = edges[source][target]
        where = f"{known[source].relative_to(ROOT)}:{edge.line}"
        how = f", importing {edge.via}" if edge.via else ""
        steps.append(f"→ {target} ({where}{how})")
    return " ".join(steps)


def lazy_imports(known: dict[str, Path]) -> list[tuple[str, Import]]:
    return [
        (name, found)
        for name, path in known.items()
        for found in imports(name, path, known)
        if found.lazy
    ]


def _allowed(name: str, target: str, known: dict[str, Path]) -> tuple[str, str] | None:
    for key in ((name, target), (name, "*")):
        if key in LAZY_ALLOWED and (key[1] != "*" or module_of(target, known) is None):
            return key
    return None


def test_no_import_cycles() -> None:
    known = modules(packages())
    edges = graph(known)
    found = cycles(edges)
    report = [
        f"{len(component)} modules: {', '.join(component)}\n  e.g. "
        + describe(shortest_cycle(component, edges), edges, known)
        for component in found
    ]
    assert not found, "import cycles (break them; do not hide them in a function):\n" + (
        "\n".join(report)
    )


def test_lazy_imports_are_listed() -> None:
    """Every import inside a function is allowed, with a reason, in LAZY_ALLOWED; and every
    entry there is still used, so the list stays the list of what is lazy."""
    known = modules(packages())
    unlisted: list[str] = []
    used: set[tuple[str, str]] = set()
    for name, found in lazy_imports(known):
        key = _allowed(name, found.target, known)
        if key is None:
            unlisted.append(f"{known[name].relative_to(ROOT)}:{found.line}: {found.target}")
        else:
            used.add(key)
    assert not unlisted, (
        "imports inside functions that LAZY_ALLOWED does not list: import them at the top "
        "of the module, or add them with the reason (pyspark or a heavy optional "
        "library kept out of flowc compile):\n" + "\n".join(unlisted)
    )
    assert not set(LAZY_ALLOWED) - used, f"unused entries: {sorted(set(LAZY_ALLOWED) - used)}"


def test_compiling_loads_nothing_that_waits() -> None:
    """What the lazy imports keep out stays out: ``flowc check`` and ``flowc compile
    --emit pyspark`` of a clean program load none of the modules LAZY_ALLOWED names (by
    their top-level package; flowc's and the standard library's by module, as its packages,
    importlib for one, are loaded anyway), so no import at the top of another module loads
    them anyway."""
    kept_out = sorted(
        {
            target if target.split(".")[0] in sys.stdlib_module_names else target.split(".")[0]
            for _, target in LAZY_ALLOWED
            if not target.startswith("flowc")
        }
        - {"*"}
        | {target for _, target in LAZY_ALLOWED if target.startswith("flowc.")}
        - {"flowc.cli.compile", "flowc.spark.codegen"}  # the command, and what --emit pyspark runs
    )
    code = (
        "import contextlib, io, sys\n"
        "from flowc.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['check', 'examples/wordcount.flow']) == 0\n"
        "    assert main(['compile', 'examples/wordcount.flow', '--emit', 'pyspark']) == 0\n"
        f"kept_out = {kept_out!r}\n"
        "print(sorted(k for k in kept_out if any(m == k or m.startswith(k + '.') "
        "for m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert {
        "lark",
        "pyspark",
        "importlib.metadata",
        "flowc.runtime.run",
        "flowc.cli.diff",
        "flowc.cli.test",
    } <= set(kept_out)
    assert done.stdout.strip() == "[]", f"loaded while compiling: {done.stdout}"


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules({"pkg": root / "src"})


def test_the_graph_sees_lazy_package_and_relative_imports(tmp_path: Path) -> None:
    """The checks above find nothing only if the graph would see the cycles there are: a
    cycle closed inside a function, through a package's ``__init__``, and by a relative
    import are all found; one under TYPE_CHECKING is not."""
    known = _write(
        tmp_path,
        {
            "src/__init__.py": "from pkg import a\n__version__ = '1'\n",
            "src/a.py": "from pkg.sub.c import f\n",
            "src/b.py": "import os\ndef f():\n    from pkg import a\n",
            "src/sub/__init__.py": "from . import d\n",
            "src/sub/c.py": "def f(): ...\n",
            "src/sub/d.py": "from ..a import *\n",
            "src/e.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import f\n",
            "src/f.py": "from pkg import e\n",
            "src/g.py": "from pkg import __version__\n",
        },
    )
    edges = graph(known)
    assert edges["pkg.b"]["pkg.a"].line == 3  # inside a function
    assert "pkg.e" in edges["pkg.f"] and "pkg.f" not in edges["pkg.e"]  # TYPE_CHECKING
    assert edges["pkg.a"]["pkg.sub"].via == "pkg.sub.c"  # the package's __init__ runs
    assert "pkg" in edges["pkg.g"]  # a name of the root's __init__
    assert "pkg" not in edges["pkg.f"]  # a submodule of the root only
    # a → sub (its __init__) → d → a, the last one relative
    assert cycles(edges) == [["pkg.a", "pkg.sub", "pkg.sub.d"]]
    assert shortest_cycle(cycles(edges)[0], edges) == ["pkg.a", "pkg.sub", "pkg.sub.d", "pkg.a"]
    assert [(name, i.target, i.line) for name, i in lazy_imports(known)] == [("pkg.b", "pkg.a", 3)]


def _fresh_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_flowc_makes_its_modules_without_young_collections() -> None:
    """``import flowc`` pauses the cyclic collector while its modules (and sqlglot's) are
    made, moves them to the oldest generation (no young collection scans them: a hundred
    did, 10 ms of the import) and turns the collector back on; an application's frozen
    objects stay frozen."""
    code = (
        "import gc\n"
        "before = [s['collections'] for s in gc.get_stats()]\n"
        "import flowc\n"
        "after = [s['collections'] for s in gc.get_stats()]\n"
        "print(after[0] - before[0], after[1] - before[1], gc.isenabled(), "
        "gc.get_freeze_count())\n"
    )
    young, middle, enabled, frozen = _fresh_python(code).split()
    assert int(young) < 20 and int(middle) <= 1, (young, middle)
    assert enabled == "True" and frozen == "0"
    code = (
        "import gc\n"
        "kept = [[] for _ in range(1000)]\n"
        "gc.freeze()\n"
        "frozen = gc.get_freeze_count()\n"
        "import flowc\n"
        "print(0 < gc.get_freeze_count() <= frozen, gc.isenabled())\n"
    )
    assert _fresh_python(code).split() == ["True", "True"]


def test_import_flowc_leaves_importlib_metadata_for_first_use() -> None:
    """``import flowc`` does not load ``importlib.metadata`` (sqlglot imports it for
    dialect plugins), yet what sqlglot kept of it answers as the real module does: its
    ``entry_points`` finds the same entry points, and the name is the real module after."""
    code = (
        "import sys\n"
        "import flowc\n"
        "print('importlib.metadata' in sys.modules)\n"
        "from sqlglot.dialects import dialect\n"
        "found = sorted(e.name for e in dialect.entry_points(group='console_scripts'))\n"
        "import importlib.metadata as real\n"
        "print(found == sorted(e.name for e in real.entry_points(group='console_scripts')))\n"
        "print(type(real.version('sqlglot')).__name__, hasattr(real, '__file__'))\n"
    )
    assert _fresh_python(code).split() == ["False", "True", "str", "True"]


def test_the_metadata_stand_in_is_the_real_module_to_other_importers() -> None:
    """Another thread importing ``importlib.metadata`` while sqlglot is imported gets the
    stand-in (by ``import importlib.metadata as m`` or by the package's attribute): every
    public name it reads is the real module's; and where the real module is loaded
    already, the stand-in is not made."""
    code = (
        "import sys\n"
        "import flowc\n"
        "with flowc._metadata_on_first_use():\n"
        "    import importlib.metadata as seen\n"
        "    import importlib.metadata\n"
        "    loaded = 'importlib.metadata._adapters' in sys.modules\n"
        "    plain = importlib.metadata.version('sqlglot')\n"
        "    version = seen.version('sqlglot')\n"
        "import importlib.metadata as real\n"
        "same = seen.Distribution is real.Distribution\n"
        "print(loaded, version == real.version('sqlglot'), same, plain == version)\n"
        "print(importlib.metadata is real)\n"
        "with flowc._metadata_on_first_use():\n"
        "    print(sys.modules['importlib.metadata'] is real)\n"
    )
    assert _fresh_python(code).split() == ["False", "True", "True", "True", "True", "True"]
