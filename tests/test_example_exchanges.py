"""How the examples' exchanges are planned in both exchange modes.

That Spark executes exactly the planned exchanges, every example in both modes, is checked
where each example runs on its shipped data (test_examples_shipped.py).
"""

from __future__ import annotations

from stages import EXAMPLES

import flowc


def test_clicks_per_user_runs_one_shuffle_by_default() -> None:
    """Flink's graph has three exchanges; two exist only because the parallelism changes:
    the source's into the filters (the window's own exchange redistributes the rows
    anyway) and the window's into the sink (narrowing: coalesce)."""
    example = next(e for e in EXAMPLES if e.stem == "clicks_per_user")
    plans = {}
    for mode in ("minimal", "flink"):
        job = flowc.compile(
            example.read_text(encoding="utf-8"),
            str(example),
            for_spark=True,
            overrides={"exchanges": mode},
        )
        (query,) = job.spark_plan.queries
        plans[mode] = query
    assert plans["flink"].exchanges_planned == 3
    minimal = plans["minimal"]
    assert minimal.exchanges_planned == 1
    assert [e.spark for e in minimal.exchanges] == [
        "none",
        "groupBy(user_id, window)",
        "coalesce(4)",
    ]
    assert "redistributes these rows anyway" in minimal.exchanges[0].why
    assert "the parallelism narrows (8 -> 4)" in minimal.exchanges[2].why
