"""Hypothesis strategies over tests/fuzzing.py's generators: programs and token mutants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.fuzzing import EXAMPLES, DrawChooser, generate_program, mutate_tokens


@st.composite
def programs(draw: Callable[[Any], Any]) -> str:
    return generate_program(DrawChooser(draw))


@st.composite
def token_mutants(draw: Callable[[Any], Any]) -> str:
    chooser = DrawChooser(draw)
    return mutate_tokens(chooser, EXAMPLES[chooser.choice(sorted(EXAMPLES))])
