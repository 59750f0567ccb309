"""flowc.fast_dataclass makes the classes ``dataclasses.dataclass`` makes: every class of
flowc made again by the standard library has the same signature, slots, fields and
parameters, and objects built alike have the same repr, equality, hash, frozenness and
``replace``."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil
from collections.abc import Callable
from dataclasses import FrozenInstanceError, InitVar, field
from typing import ClassVar

import pytest

import flowc
from flowc.fast_dataclass import MADE, dataclass


def _import_every_compiler_module() -> None:
    """Every module of flowc outside the runtime (which needs pyspark) and ``__main__``."""
    for module in pkgutil.walk_packages(flowc.__path__, "flowc."):
        if not module.name.startswith(("flowc.runtime", "flowc.__main__")):
            importlib.import_module(module.name)


def shape(function: object) -> list[tuple[str, object, str]]:
    assert callable(function)
    return [
        (p.name, p.kind, repr(p.default)) for p in inspect.signature(function).parameters.values()
    ]


def standard(made: type) -> type:
    """``made``'s class as written, made by ``dataclasses.dataclass`` with its options."""
    written, kw_only = MADE[made]
    params = made.__dataclass_params__  # type: ignore[attr-defined]
    made_again: type = dataclasses.dataclass(
        written,
        init=params.init,
        repr=params.repr,
        eq=params.eq,
        frozen=params.frozen,
        kw_only=kw_only,
        slots=True,
    )
    return made_again


def arguments(cls: type, seed: int) -> tuple[list[object], dict[str, object]] | None:
    """Arguments for each parameter of ``cls``'s generated ``__init__`` (distinct ints from
    ``seed``), or None where the class writes its own."""
    if "__init__" in MADE[cls][0].__dict__:
        return None
    positional: list[object] = []
    keywords: dict[str, object] = {}
    for index, parameter in enumerate(inspect.signature(cls).parameters.values()):
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            keywords[parameter.name] = seed + index
        else:
            positional.append(seed + index)
    return positional, keywords


def outcome(action: Callable[[], object]) -> object:
    """What ``action()`` gives, or the class of what it raises (a class may leave a field
    unset until later); a repr's class name is left out."""
    try:
        given = action()
    except Exception as error:
        return type(error)
    return given.split("(", 1)[1] if isinstance(given, str) else given


def test_every_flowc_class_is_the_standard_librarys() -> None:
    _import_every_compiler_module()
    ours = [made for made in MADE if made.__module__.startswith("flowc.")]
    assert len(ours) >= 150
    built = 0
    for made in ours:
        given = arguments(made, 0)  # before the standard library adds an __init__ to it
        again = standard(made)
        assert shape(made.__init__) == shape(again.__init__), made
        assert made.__slots__ == again.__slots__, made  # type: ignore[attr-defined]
        assert made.__match_args__ == again.__match_args__, made  # type: ignore[attr-defined]
        assert repr(made.__dataclass_params__) == repr(again.__dataclass_params__), made  # type: ignore[attr-defined]
        assert [(f.name, f.type, f.kw_only) for f in dataclasses.fields(made)] == [
            (f.name, f.type, f.kw_only) for f in dataclasses.fields(again)
        ], made
        assert made.__dataclass_fields__.keys() == again.__dataclass_fields__.keys(), made  # type: ignore[attr-defined]
        assert (made.__hash__ is None) == (again.__hash__ is None), made
        for name in ("__getstate__", "__setstate__"):
            assert hasattr(made, name) == hasattr(again, name), (made, name)
        if given is not None:
            behave_alike(made, again, *given)
            built += 1
    assert built >= 100


def equal(one: object, other: object) -> object:
    return outcome(lambda: one == other)


def behave_alike(
    made: type, again: type, positional: list[object], keywords: dict[str, object]
) -> None:
    """Objects of ``made`` and ``again`` built from the same arguments print, compare,
    hash, refuse assignment and are replaced alike."""
    ours, theirs = made(*positional, **keywords), again(*positional, **keywords)
    assert outcome(lambda: repr(ours)) == outcome(lambda: repr(theirs)), made
    names = [p.name for p in inspect.signature(made).parameters.values()]
    values = [*positional, *keywords.values()]
    for name in names:
        changed = dict(zip(names, values, strict=True)) | {name: -1}
        ours_changed = dataclasses.replace(ours, **{name: -1})
        theirs_changed = dataclasses.replace(theirs, **{name: -1})
        assert equal(ours, ours_changed) == equal(theirs, theirs_changed), (made, name)
        assert equal(ours_changed, made(**changed)) == equal(theirs_changed, again(**changed)), (
            made,
            name,
        )
    same, theirs_same = made(*positional, **keywords), again(*positional, **keywords)
    assert equal(ours, same) == equal(theirs, theirs_same), made
    assert outcome(lambda: hash(ours) == hash(same)) == outcome(
        lambda: hash(theirs) == hash(theirs_same)
    ), made
    if made.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        for instance in (ours, theirs):
            with pytest.raises(FrozenInstanceError):
                setattr(instance, names[0] if names else "absent", 0)
        assert outcome(lambda: pickle.loads(pickle.dumps(ours)) == ours) in (True, AttributeError)


@dataclass(frozen=True, slots=True)
class _Sample:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=4, kw_only=True)
    e: int = field(kw_only=True, default_factory=lambda: 5)
    f: int = field(default=6, compare=False, repr=False)
    g: list[int] = field(init=False, default_factory=lambda: [7])
    shared: ClassVar[int] = 9


@dataclass(frozen=True, slots=True, kw_only=True)
class _Child(_Sample):
    h: int = 8


def test_the_objects_it_makes() -> None:
    made = _Sample(1)
    assert (made.a, made.b, made.c, made.d, made.e, made.f, made.g) == (1, "b", [], 4, 5, 6, [7])
    assert made.c is not _Sample(1).c  # a fresh default from the factory each time
    assert _Sample.shared == 9 and "shared" not in _Sample.__slots__
    assert [f.name for f in dataclasses.fields(_Sample)] == ["a", "b", "c", "d", "e", "f", "g"]
    assert repr(made) == "_Sample(a=1, b='b', c=[], d=4, e=5, g=[7])"
    assert made == _Sample(1, f=0) and made != _Sample(2)
    assert _Sample(1, "x", [2], d=3, e=6) == dataclasses.replace(made, b="x", c=[2], d=3, e=6)
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample(1, "x", [], 3, 4)  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Sample(1, g=[])  # type: ignore[call-arg]
    with pytest.raises(FrozenInstanceError):
        made.a = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del made.a  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(made)  # a list field: the tuple hashed holds it
    child = _Child(1, h=3)
    assert (child.a, child.h) == (1, 3) and child != _Sample(1)
    assert _Child.__slots__ == ("h",) and _Child.__match_args__ == ("a", "b", "c", "f")
    for cls in (_Sample, _Child):
        given = arguments(cls, 10)
        again = standard(cls)
        assert given is not None and shape(cls.__init__) == shape(again.__init__)
        behave_alike(cls, again, *given)


def test_class_methods_and_hashes_it_keeps_or_sets() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

        def __repr__(self) -> str:
            return "mine"

    @dataclass(frozen=True, slots=True)
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 42

    @dataclass(slots=True, eq=False)
    class Identity:
        a: int

    m = Mutable(1)
    m.a = 2
    assert repr(m) == "mine" and Mutable.__hash__ is None and m == Mutable(2)
    assert hash(OwnHash(1)) == 42
    assert Identity(1) != Identity(1) and hash(Identity(1)) != 0


def test_a_recursive_repr_ends() -> None:
    @dataclass(slots=True)
    class Node:
        next: object = None

    node = Node()
    node.next = node
    assert repr(node) == "test_a_recursive_repr_ends.<locals>.Node(next=...)"


def test_the_standard_librarys_errors() -> None:
    with pytest.raises(ValueError, match="mutable default"):

        @dataclass(frozen=True, slots=True)
        class MutableDefault:
            a: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @dataclass(frozen=True, slots=True)
        class Order:
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclass(slots=True)
        class Thawed(_Sample):
            pass


def test_forms_it_leaves_to_the_standard_library() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(slots=True)
    class WithInitVar:
        a: int
        b: InitVar[int]

    for cls in (NoSlots, PostInit, WithInitVar):
        assert cls not in MADE and dataclasses.is_dataclass(cls)
    assert NoSlots(1) == NoSlots(1) and "__slots__" not in NoSlots.__dict__
    assert WithInitVar(1, 2).a == 1


def test_init_is_compiled_when_first_looked_up() -> None:
    """A class's ``__init__`` is compiled when an object is first made or its signature
    asked, then is the class's own function; a subclass's objects made through an
    inherited ``__init__`` compile it once, on the class that has it."""

    @dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 0

    @dataclass(frozen=True, slots=True, init=False)
    class Tagged(Point):
        pass

    @dataclass(frozen=True, slots=True)
    class Mark:
        name: str

    def compiled(cls: type) -> bool:
        return inspect.isfunction(cls.__dict__["__init__"])

    assert not compiled(Point) and not compiled(Mark)
    assert [p.name for p in inspect.signature(Mark).parameters.values()] == ["name"]
    assert compiled(Mark) and Mark("m") == Mark("m")
    assert Tagged(3, 4).y == 4 and compiled(Point) and "__init__" not in Tagged.__dict__
    assert Point(1) == Point(1, 0) and Point.__init__.__qualname__.endswith("Point.__init__")
    assert Point.__init__ is Point.__dict__["__init__"]
