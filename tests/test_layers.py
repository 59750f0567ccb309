"""flowc's packages are stages of one pipeline, and a lower stage never imports a higher one.

The layers, lowest first, are the ones docs/architecture.md draws: Flink's own algorithms
and the grammar's tables; the core every stage shares (spans, codes, diagnostics, the
words, the parse tree and the checked program); the SQL of expressions; the front end;
the trust model; the analysis; Flink's graph passes; the Spark backend; state; the driver
that runs the passes; the tools built on compiled jobs (formatter, viewer, language
server, diff, user tests); the runtime on Spark; the command line. A module may import its
own layer and those below it, never one above: so a pass cannot reach into a later one,
the core does not grow a dependency on a stage, and compiling never loads what only
running needs. Imports under ``TYPE_CHECKING`` do not run and are not counted.
"""

from __future__ import annotations

import ast

import pytest

from tests.helpers.import_graph import ROOT, Edge, graph, modules, packages

#: Each layer, lowest first: the packages it is, and the top-level modules of ``flowc``
#: (``compiler/*.py``) that belong to it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("flink", ("flowc.flink", "flowc.grammar")),
    (
        "core",
        (
            "flowc._version",
            "flowc.fast_dataclass",
            "flowc.spans",
            "flowc.errorcodes",
            "flowc.diagnostics",
            "flowc.vocabulary",
            "flowc.limits",
            "flowc.json_records",
            "flowc.outputs",
            "flowc.render",
            "flowc.ast",
            "flowc.catalog",
            "flowc.program",
        ),
    ),
    ("sql", ("flowc.sql",)),
    ("front end", ("flowc.syntax",)),
    ("trust", ("flowc.trust",)),
    ("analysis", ("flowc.analyze",)),
    ("Flink graph", ("flowc.graph",)),
    ("Spark backend", ("flowc.spark",)),
    ("state", ("flowc.state",)),
    ("driver", ("flowc", "flowc.job", "flowc.passes", "flowc.driver")),
    (
        "tools",
        ("flowc.formatter", "flowc.viewer", "flowc.lsp", "flowc.diff", "flowc.usertest"),
    ),
    ("runtime", ("flowc.runtime",)),
    ("command line", ("flowc.cli", "flowc.__main__")),
)

#: The packages that are a stage (or all of one): each ``__init__`` says what it owns and
#: what it may import.
STAGE_PACKAGES = sorted(
    name
    for _, members in LAYERS
    for name in members
    if name != "flowc" and modules(packages())[name].name == "__init__.py"
)


def layer_of(module: str) -> int:
    """The layer of ``module``: its own entry, else its package's."""
    members = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}
    name = module
    while name not in members:
        if "." not in name:
            raise KeyError(module)
        name = name.rpartition(".")[0]
    return members[name]


def test_every_module_has_a_layer() -> None:
    """A new top-level module must be placed in a layer (and on the architecture page)."""
    known = modules(packages())
    unplaced = []
    for name in sorted(known):
        try:
            layer_of(name)
        except KeyError:
            unplaced.append(name)
    assert layer_of("flowc") == [n for n, _ in LAYERS].index("driver")
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"


def upward_imports(edges: dict[str, dict[str, Edge]]) -> list[tuple[str, Edge]]:
    """Each import of a module of a higher layer than the importer's."""
    return [
        (source, edge)
        for source, targets in sorted(edges.items())
        for target, edge in sorted(targets.items())
        if layer_of(target) > layer_of(source)
    ]


def test_no_stage_imports_a_later_stage() -> None:
    known = modules(packages())
    upward = [
        f"{known[source].relative_to(ROOT)}:{edge.line}: {source} "
        f"({LAYERS[layer_of(source)][0]}) imports {edge.target} "
        f"({LAYERS[layer_of(edge.target)][0]})"
        for source, edge in upward_imports(graph(known))
    ]
    assert not upward, "a lower stage imports a higher one:\n" + "\n".join(upward)


def test_the_rule_sees_an_upward_import() -> None:
    """The check is not vacuous: the analysis importing the Spark backend, the core
    importing the SQL package and the runtime importing the command line are seen; the
    reverse imports are not."""
    pairs = [
        ("flowc.analyze.views", "flowc.spark.spark_plan"),
        ("flowc.program", "flowc.sql.sqltypes"),
        ("flowc.runtime.run", "flowc.cli.run"),
    ]
    edges = {low: {high: Edge(high, 1)} for low, high in pairs}
    assert [(s, e.target) for s, e in upward_imports(edges)] == sorted(pairs)
    reverse = {high: {low: Edge(low, 1)} for low, high in pairs}
    assert upward_imports(reverse) == []


@pytest.mark.parametrize("package", STAGE_PACKAGES)
def test_each_stage_says_what_it_owns_and_may_import(package: str) -> None:
    path = modules(packages())[package]
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert len(docstring.split()) >= 12, f"{path}: say what the package owns"
    assert "May import:" in docstring, f"{path}: say what it may import ('May import: ...')"
