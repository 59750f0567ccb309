"""flowc.slot_init: the fast ``__init__`` takes the arguments the dataclass's did and
makes the same, still frozen, objects."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

import flowc  # noqa: F401 (imports every class given the fast __init__)
from flowc.program import Hints
from flowc.slot_init import REPLACED, slot_init


def shape(init: object) -> list[tuple[str, object, str]]:
    assert callable(init)
    return [(p.name, p.kind, repr(p.default)) for p in inspect.signature(init).parameters.values()]


def test_every_replaced_init_keeps_the_dataclass_signature() -> None:
    assert len(REPLACED) >= 12
    for cls, dataclass_init in REPLACED.items():
        assert shape(cls.__init__) == shape(dataclass_init), cls


@slot_init
@dataclass(frozen=True, slots=True)
class _Sample:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=4, kw_only=True)
    e: int = field(kw_only=True, default_factory=lambda: 5)


def test_the_same_objects_as_the_dataclass_made() -> None:
    made = _Sample(1)
    assert (made.a, made.b, made.c, made.d, made.e) == (1, "b", [], 4, 5)
    assert made.c is not _Sample(1).c  # a fresh default from the factory each time
    made = _Sample(1, "x", [2], d=3, e=6)
    assert (made.a, made.b, made.c, made.d, made.e) == (1, "x", [2], 3, 6)
    original = object.__new__(_Sample)
    REPLACED[_Sample](original, 1, "x", [2], d=3, e=6)
    assert original == made and hash(repr(original)) == hash(repr(made))
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample(1, "x", [], 3)  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        made.a = 2  # type: ignore[misc]
    hints = Hints(name="n")
    assert hints.spans == {} and hints.spans is not Hints(name="n").spans


def test_only_frozen_slotted_dataclasses_without_post_init() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, PostInit):
        with pytest.raises(TypeError):
            slot_init(cls)
