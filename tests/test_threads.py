"""flowc.compile from many threads at once: every result is the serial one, and the
process's own settings (the collector's thresholds, the recursion limit) are left as the
application set them.

The corpus mixes the examples, generated programs (tests/fuzzing.py) and programs made to
hit the memo caches hard: distinct expressions, repeated ones (a kept tree is copied for
each use), distinct STRUCT types, large literals. The caches are shrunk during the runs, so
they evict all the time. ``FLOWC_THREAD_COMPILES`` sets the compiles per thread (CI: 150;
``python -m benchmarks.soak --threads`` runs thousands).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fuzzing import generate_program, seeded

import flowc
from flowc import ast, limits
from flowc.diagnostics import Diagnostic
from flowc.syntax.astdump import ast_to_json, ast_to_text

ROOT = Path(__file__).resolve().parent.parent
THREADS = 8
COMPILES_PER_THREAD = int(os.environ.get("FLOWC_THREAD_COMPILES", "150"))

HEADER = (
    "SET parallelism = 2;\n"
    "CREATE SOURCE s (k BIGINT, v BIGINT, name STRING, ts TIMESTAMP,\n"
    "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS) WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'noop');\n"
)


def example_programs() -> dict[str, str]:
    """examples/ and examples/errors/, and ../shared/examples if the checkout has it beside it."""
    folders = [ROOT / "examples", ROOT / "examples" / "errors"]
    shared = ROOT.parent / "shared" / "examples"  # ../shared/examples, beside the checkout
    folders += [shared, shared / "errors"]
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.flow")):
            text = path.read_text(encoding="utf-8")
            if text not in found.values():
                found[str(path)] = text
    return found


def expression_program(i: int) -> str:
    """Each its own expressions, and some shared with every other (kept trees and typings)."""
    return HEADER + (
        f"CREATE VIEW w AS FROM s |> WHERE v > {i} AND lower(name) LIKE 'n{i}%'\n"
        f"  |> EXTEND v * {i % 7} + k AS x{i}, concat(name, '{i}') AS label\n"
        "  |> WHERE k IS NOT NULL AND v + 1 > 0;\n"
        "INSERT INTO o FROM w |> KEY BY k\n"
        f"  |> WINDOW TUMBLE(ts, INTERVAL {1 + i % 5} MINUTE)\n"
        f"  |> AGGREGATE count(*) AS n, sum(x{i}) AS total, max(label) AS top;\n"
        f"INSERT INTO o SELECT k, v + {i} AS v FROM s WHERE name <> 'x{i % 3}';\n"
    )


def struct_program(i: int) -> str:
    """A distinct STRUCT type per program (the type caches), read through its fields."""
    return (
        f"CREATE SOURCE s (k BIGINT, p STRUCT<a{i}: BIGINT, b: ARRAY<STRING>, "
        f"c: MAP<STRING, DOUBLE>, d{i % 4}: STRUCT<x: INT, y{i}: TIMESTAMP>>)\n"
        "  WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'noop');\n"
        f"INSERT INTO o FROM s |> WHERE p.a{i} > {i} |> SELECT k, p.a{i} AS a, p.b AS b;\n"
    )


def literal_program(i: int, size: int = 40_000) -> str:
    """A large literal, distinct per program (larger than the shrunk caches' entries)."""
    literal = (f"{i}:" + "abcdefgh" * (size // 8))[:size]
    return HEADER + f"INSERT INTO o FROM s |> WHERE name <> '{literal}' |> SELECT k, name;\n"


def corpus(generated: int = 60) -> dict[str, str]:
    programs = example_programs()
    for seed in range(generated):
        programs[f"generated-{seed}"] = generate_program(seeded(seed))
    for i in range(40):
        programs[f"expressions-{i}"] = expression_program(i)
    for i in range(20):
        programs[f"struct-{i}"] = struct_program(i)
    for i in range(6):
        programs[f"literal-{i}"] = literal_program(i)
    return programs


def _diagnostics(diagnostics: tuple[Diagnostic, ...] | list[Diagnostic]) -> str:
    return "\n".join(f"{d.code} {d.severity} {d.span} {d.message} | {d.help}" for d in diagnostics)


def _trees(node: object) -> Iterator[str]:
    """Each SQL tree of the AST, written back as SQL with its type: a race on a tree (a
    shared parser, a kept typing applied to the wrong tree) shows here."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.SqlExpr | ast.SqlQuery):
            yield f"{item.tree.sql()} :: {item.tree.type.sql() if item.tree.type else None}"
        elif isinstance(item, tuple | list):
            stack.extend(reversed(item))
        elif hasattr(item, "__dataclass_fields__"):
            stack.extend(reversed([getattr(item, f) for f in item.__dataclass_fields__]))


def fingerprint(text: str, name: str) -> str:
    """Everything a compile gives: diagnostics, or every stage in every format."""
    try:
        job = flowc.compile(text, f"{name}.flow")
    except flowc.CompileError as error:
        return "errors\n" + _diagnostics(error.diagnostics)
    parts = [
        _diagnostics(job.diagnostics),
        _diagnostics(job.spark_diagnostics),
        ast_to_json(job.ast),
        ast_to_text(job.ast),
        "\n".join(_trees(job.ast)),
    ]
    for stage in (job.transformations, job.stream_graph, job.job_graph):
        parts += [stage.to_text(), stage.to_json(), stage.to_dot(), stage.to_mermaid()]
    parts += [job.physical_plan.to_text(), job.physical_plan.to_json()]
    return "\n\x00\n".join(parts)


@pytest.fixture
def small_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches a few dozen KB large, so that entries come and go all the time."""
    for cache in limits.CACHES.values():
        monkeypatch.setattr(cache, "max_bytes", 48 << 10)
        monkeypatch.setattr(cache, "max_entry_bytes", 16 << 10)
        cache.clear()


def run_in_threads(
    programs: dict[str, str], compiles: int, threads: int = THREADS
) -> list[tuple[str, str]]:
    """``threads`` threads, each compiling ``compiles`` programs of the corpus (a different
    order per thread); the (name, fingerprint) of every compile, or the first exception."""
    names = sorted(programs)
    results: list[tuple[str, str]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work(index: int) -> None:
        start.wait()
        mine: list[tuple[str, str]] = []
        try:
            for n in range(compiles):
                name = names[(index * 7919 + n * (2 * index + 1)) % len(names)]
                mine.append((name, fingerprint(programs[name], name)))
        except BaseException as error:
            with lock:
                failures.append(error)
        with lock:
            results.extend(mine)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]
    return results


def test_concurrent_compiles_give_the_serial_results(small_caches: None) -> None:
    programs = corpus()
    serial = {name: fingerprint(text, name) for name, text in programs.items()}
    assert sum(value.startswith("errors\n") for value in serial.values()) < len(serial) / 2
    results = run_in_threads(programs, COMPILES_PER_THREAD)
    assert len(results) == THREADS * COMPILES_PER_THREAD
    wrong = sorted({name for name, found in results if found != serial[name]})
    assert wrong == []
    # and serially again, after all that: the caches were not corrupted either
    assert {name: fingerprint(text, name) for name, text in programs.items()} == serial


def test_caches_stay_within_their_budgets(small_caches: None) -> None:
    programs = corpus(generated=10)
    run_in_threads(programs, 20)
    for cache in limits.CACHES.values():
        assert 0 <= cache.bytes <= cache.max_bytes
        assert cache.bytes == sum(size for _, size in cache._data.values())


def _with_settings(action: Callable[[], None]) -> tuple[tuple[int, int, int], int, bool]:
    """Run ``action`` with the application's own settings; what they are afterwards."""
    thresholds, limit = gc.get_threshold(), sys.getrecursionlimit()
    gc.set_threshold(555, 7, 9)
    sys.setrecursionlimit(1234)
    try:
        action()
        return gc.get_threshold(), sys.getrecursionlimit(), gc.isenabled()
    finally:
        gc.set_threshold(*thresholds)
        sys.setrecursionlimit(limit)


def test_the_applications_settings_are_unchanged_after_concurrent_compiles() -> None:
    programs = {name: text for name, text in corpus(generated=10).items() if "literal" not in name}
    after = _with_settings(lambda: run_in_threads(programs, 15))
    assert after == ((555, 7, 9), 1234, True)


def test_settings_the_application_changes_during_compiles_stay() -> None:
    """The last compilation to finish restores what the first found, unless the
    application set something else meanwhile: then the application's value stays."""
    from flowc.driver import _COLLECTOR
    from flowc.sql.sql_parsing import _RECURSION

    programs = {name: text for name, text in corpus(generated=10).items() if "literal" not in name}

    def change_midway() -> None:
        changer_done = threading.Event()

        def changer() -> None:
            while _COLLECTOR.holders == 0:  # wait until compiles hold the settings
                time.sleep(0.001)
            gc.set_threshold(600, 8, 11)
            sys.setrecursionlimit(9000)
            changer_done.set()

        thread = threading.Thread(target=changer)
        thread.start()
        run_in_threads(programs, 15)
        thread.join()
        assert changer_done.is_set()

    after = _with_settings(change_midway)
    assert after == ((600, 8, 11), 9000, True)
    assert _COLLECTOR.holders == 0 and _RECURSION.holders == 0


def test_compile_leaves_the_settings_alone_when_it_has_nothing_to_change() -> None:
    """A limit above flowc's, or the collector off: nothing is set, nothing restored."""
    thresholds, limit = gc.get_threshold(), sys.getrecursionlimit()
    text = expression_program(3)
    try:
        sys.setrecursionlimit(20_000)
        gc.disable()
        gc.set_threshold(700, 10, 10)
        flowc.compile(text)
        assert (gc.get_threshold(), sys.getrecursionlimit(), gc.isenabled()) == (
            (700, 10, 10),
            20_000,
            False,
        )
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)
        sys.setrecursionlimit(limit)


def test_rendering_in_many_threads_leaves_the_collector_on() -> None:
    """Each rendering pauses the cyclic collector; when they overlap, the collector is on
    again once the last ends (a check-then-disable per thread left it off for good, which a
    full CI run found as this module's settings tests failing)."""
    from flowc.outputs import paused_gc

    def render_often() -> None:
        for _ in range(20_000):
            with paused_gc():
                pass

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for _ in range(3):
            assert gc.isenabled()
            threads = [threading.Thread(target=render_often) for _ in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert gc.isenabled()
    finally:
        sys.setswitchinterval(interval)
