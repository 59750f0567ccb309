"""Plans compared without positions: the same job written on other lines, or in another
form (a SQL view and its pipe steps), differs only there."""

from __future__ import annotations


def without_spans(data: object) -> object:
    """``data`` (a plan's JSON, loaded) with every ``span`` left out, at any depth."""
    if isinstance(data, dict):
        return {k: without_spans(v) for k, v in data.items() if k != "span"}
    if isinstance(data, list):
        return [without_spans(v) for v in data]
    return data
