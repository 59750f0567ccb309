"""What the tests expect of ``--emit``, written once for every test module that needs it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))
#: The Flink documentation's examples in the Flink dialect (examples/flink_sql/README.md):
#: compiled, checked and snapshot as the others are; their answers on Spark are tested in
#: test_flink_sql_examples.py.
FLINK_SQL_EXAMPLES = sorted((ROOT / "examples" / "flink_sql").glob("*.flow"))
#: Every example that compiles: the ones above and the Flink-dialect ones.
COMPILED_EXAMPLES = EXAMPLES + FLINK_SQL_EXAMPLES

#: Every stage and the formats it has (``--emit all`` writes exactly these).
STAGE_FORMATS: dict[str, tuple[str, ...]] = {
    "ast": ("text", "json"),
    "transformations": ("text", "json", "dot", "mermaid"),
    "streamgraph": ("text", "json", "dot", "mermaid"),
    "jobgraph": ("text", "json", "dot", "mermaid"),
    "physical": ("text", "json"),
    "pyspark": ("text",),
}
#: File names ``--emit all`` writes: ``<stage>.<extension>``.
EXTENSIONS = {"text": "txt", "json": "json", "dot": "dot", "mermaid": "mmd", "html": "html"}


def emitted_file(stage: str, fmt: str) -> str:
    return f"{stage}.py" if stage == "pyspark" else f"{stage}.{EXTENSIONS[fmt]}"


COMBINATIONS = [(stage, fmt) for stage, formats in STAGE_FORMATS.items() for fmt in formats]
#: The graph stages' plan viewer pages (docs/viewer.md): written by ``--emit all`` too, but
#: not snapshot (tests/test_viewer.py checks them).
HTML_STAGES = ("transformations", "streamgraph", "jobgraph")
#: Every (stage, format) ``--emit all`` writes.
EMITTED = COMBINATIONS + [(stage, "html") for stage in HTML_STAGES]
