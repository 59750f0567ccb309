"""Generated .flow jobs of a given number of operators, for the compile benchmarks.

Each view holds ten steps (filters, maps, an exchange, a keyed aggregate every so often),
so the job has several vertices per view, as real jobs do.
"""

from __future__ import annotations

STEPS = (
    "WHERE v > {i}",
    "SELECT k, v + 1 AS v",
    "EXTEND v * 2 AS w",
    "DROP w",
    "REBALANCE",
    "WHERE k <> {i}",
    "SELECT k, v",
    "KEY BY k",
    "AGGREGATE sum(v) AS v WITH (uid = 'agg-{i}')",
    "WHERE v IS NOT NULL",
)


def view_count(operators: int) -> int:
    """The number of views of ten steps that make about ``operators`` operators."""
    physical_per_view = sum(1 for s in STEPS if s not in ("REBALANCE", "KEY BY k"))
    return max(1, operators // physical_per_view)


def generate_job(operators: int) -> str:
    """A job with about ``operators`` operators (physical steps, plus one source and sinks)."""
    lines = [
        "SET parallelism = 4;",
        "SET max_parallelism = 128;",
        "CREATE SOURCE src (k BIGINT, v BIGINT) WITH (connector = 'datagen', parallelism = 2);",
        "CREATE SINK out WITH (connector = 'noop');",
    ]
    views = view_count(operators)
    previous = "src"
    for i in range(views):
        steps = " |> ".join(s.format(i=i) for s in STEPS)
        lines.append(f"CREATE VIEW v{i} AS FROM {previous} |> {steps};")
        previous = f"v{i}"
    lines.append(f"INSERT INTO out FROM {previous};")
    return "\n".join(lines) + "\n"
