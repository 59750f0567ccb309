"""Plans compared without positions: the same job written on other lines, or in another
form (a SQL view and its pipe steps), differs only there."""

from __future__ import annotations

import json
import re

import flowc


def without_spans(data: object) -> object:
    """``data`` (a plan's JSON, loaded) with every ``span`` left out, at any depth."""
    if isinstance(data, dict):
        return {k: without_spans(v) for k, v in data.items() if k != "span"}
    if isinstance(data, list):
        return [without_spans(v) for v in data]
    return data


def job_graph_json(text: str) -> str:
    """The JobGraph JSON of ``text`` compiled for Spark, without line and column numbers."""
    job = flowc.compile(text, "job.flow", for_spark=True)
    data = json.loads(job.job_graph.to_json())
    return re.sub(r'"(line|column|end_line|end_column)": \d+', "", json.dumps(data))
