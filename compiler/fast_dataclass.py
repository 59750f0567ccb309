"""``dataclass``, as the standard library's makes it, defined in a fifth of the time.

``import flowc`` defines about 190 dataclasses. ``dataclasses.dataclass`` compiles a
separate piece of generated source for each method of each class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) and asks
``inspect`` for a signature to write a docstring: about 0.5 ms a class, a quarter of the
import. This decorator makes the same class for the forms flowc uses (``slots=True``, no
``order``, ``unsafe_hash``, ``__post_init__``, ``InitVar`` or ``KW_ONLY``) with one small
compile per class, the ``__init__``, which sets each slot through its own descriptor (three
times as fast as a frozen dataclass's ``object.__setattr__`` by name, and a compile makes
these objects by the thousand), compiled when first looked up (:class:`_LazyInit`). The
other methods are shared closures with the generated ones' meaning: ``__eq__`` compares the
class and the tuple of compared fields, ``__hash__`` hashes that tuple, ``__repr__`` guards
against recursion, a frozen class refuses assignment with ``FrozenInstanceError``.
``__dataclass_fields__`` and ``__dataclass_params__`` are the standard library's own kinds,
so ``fields``, ``replace``, ``asdict`` and ``is_dataclass`` work unchanged. Any other form
is handed to ``dataclasses.dataclass``.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import re
from _thread import get_ident
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, field
from operator import attrgetter
from types import CodeType, MemberDescriptorType
from typing import ClassVar, TypeVar, cast, dataclass_transform, overload

T = TypeVar("T")

#: Every class this module made, with the class as written (before its slots) and its
#: ``kw_only``: tests/test_fast_dataclass.py makes each again with
#: ``dataclasses.dataclass`` and compares the two.
MADE: dict[type, tuple[type, bool]] = {}


@dataclasses.dataclass
class _Probe:
    probe: int
    shared: ClassVar[int] = 0


#: The standard library's marks of a real field and of a class variable
#: (``dataclasses._FIELD`` and ``_FIELD_CLASSVAR``, read from fields it made rather than
#: imported by their private names).
_REAL_FIELD: object = getattr(_Probe.__dataclass_fields__["probe"], "_field_type")  # noqa: B009
_CLASS_VARIABLE: object = getattr(_Probe.__dataclass_fields__["shared"], "_field_type")  # noqa: B009

#: Annotations read as text, the way the standard library reads a postponed one: a class
#: variable, and the forms left to the standard library.
_CLASS_VARIABLE_TEXT = re.compile(r"^\s*(?:typing\s*\.\s*)?ClassVar\b")
_NOT_SERVED_TEXT = re.compile(r"^\s*(?:dataclasses\s*\.\s*)?(?:InitVar|KW_ONLY)\b")

_PARAMS: dict[tuple[bool, bool, bool, bool], object] = {}


class _Factory:
    """The default shown for a parameter whose field has a default factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _params(init: bool, repr: bool, eq: bool, frozen: bool) -> object:
    """The standard library's ``__dataclass_params__`` for these flags: a copy of the
    probe's, given them (its constructor changes between Python versions, these four
    attributes do not; a probe class made for each set of flags took 0.4 ms)."""
    key = (init, repr, eq, frozen)
    made = _PARAMS.get(key)
    if made is None:
        made = copy.copy(_Probe.__dict__["__dataclass_params__"])
        for name, value in zip(("init", "repr", "eq", "frozen"), key, strict=True):
            setattr(made, name, value)
        made = _PARAMS.setdefault(key, made)
    return made


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    kw_only: bool = False,
    slots: bool = False,
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def dataclass(
    cls: type[T] | None = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    kw_only: bool = False,
    slots: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """``dataclasses.dataclass`` with these options, faster where it can be (see the
    module's docstring)."""

    def wrap(written: type[T]) -> type[T]:
        if slots and _servable(written):
            made = _make(written, init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only)
            return cast("type[T]", made)
        return dataclasses.dataclass(
            written, init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only, slots=slots
        )

    return wrap if cls is None else wrap(cls)


def _servable(written: type) -> bool:
    """Whether ``written`` uses only what this module makes the standard library's way."""
    if hasattr(written, "__post_init__") or "__slots__" in written.__dict__:
        return False
    annotations = written.__dict__.get("__annotations__", {})  # noqa: RUF063 (as dataclasses reads them)
    if "self" in annotations:
        return False
    return not any(
        isinstance(kind, str) and _NOT_SERVED_TEXT.match(kind) is not None
        for kind in annotations.values()
    ) and all(isinstance(kind, str) for kind in annotations.values())


def _make(written: type, *, init: bool, repr: bool, eq: bool, frozen: bool, kw_only: bool) -> type:
    """The slotted class ``dataclasses.dataclass(written, slots=True, ...)`` would make."""
    fields: dict[str, Field[object]] = {}
    frozen_base = False
    dataclass_base = False
    for base in written.__mro__[-1:0:-1]:
        base_fields = base.__dict__.get("__dataclass_fields__")
        if base_fields is not None:
            dataclass_base = True
            fields.update(base_fields)
            frozen_base = frozen_base or base.__dataclass_params__.frozen  # type: ignore[attr-defined]
    if dataclass_base and frozen_base != frozen:
        raise TypeError(
            "cannot inherit frozen dataclass from a non-frozen one"
            if frozen
            else "cannot inherit non-frozen dataclass from a frozen one"
        )
    namespace = dict(written.__dict__)
    annotations: dict[str, str] = namespace.get("__annotations__", {})
    for name, kind in annotations.items():
        class_variable = _CLASS_VARIABLE_TEXT.match(kind) is not None
        default = namespace.get(name, MISSING) if class_variable else namespace.pop(name, MISSING)
        made: Field[object] = default if isinstance(default, Field) else field(default=default)
        made.name = name
        made.type = kind
        if class_variable:
            setattr(made, "_field_type", _CLASS_VARIABLE)  # noqa: B010 (a private attribute)
            if made.default_factory is not MISSING:
                raise TypeError(f"field {name} cannot have a default factory")
            if isinstance(default, Field):
                namespace[name] = made.default
            fields[name] = made
            continue
        setattr(made, "_field_type", _REAL_FIELD)  # noqa: B010 (a private attribute)
        if made.kw_only is MISSING:
            made.kw_only = kw_only
        if made.default is not MISSING and made.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(made.default)} for field {name} is not allowed:"
                " use default_factory"
            )
        fields[name] = made
    for name, value in namespace.items():
        if isinstance(value, Field):
            raise TypeError(f"{name!r} is a field but has no type annotation")
    field_list = [f for f in fields.values() if _is_real(f)]
    inherited = {slot for base in written.__mro__[1:-1] for slot in _slots_of(base)}
    namespace["__slots__"] = tuple(f.name for f in field_list if f.name not in inherited)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__dataclass_fields__"] = fields
    namespace["__dataclass_params__"] = _params(init, repr, eq, frozen)
    explicit_hash = namespace.get("__hash__", MISSING)
    has_explicit_hash = not (
        explicit_hash is MISSING or (explicit_hash is None and "__eq__" in namespace)
    )
    positional = [f.name for f in field_list if f.init and not f.kw_only]
    namespace.setdefault("__match_args__", tuple(positional))
    if repr:
        namespace.setdefault("__repr__", _repr_method([f.name for f in field_list if f.repr]))
    compared = [f.name for f in field_list if f.compare]
    if eq:
        namespace.setdefault("__eq__", _eq_method(compared))
    if frozen:
        for method in ("__setattr__", "__delattr__"):
            if method in written.__dict__:
                raise TypeError(f"Cannot overwrite attribute {method} in class {written.__name__}")
        namespace.setdefault("__getstate__", _getstate)
        namespace.setdefault("__setstate__", _setstate)
    if eq and not has_explicit_hash:
        namespace["__hash__"] = (
            _hash_method([f.name for f in field_list if (f.compare if f.hash is None else f.hash)])
            if frozen
            else None
        )
    if not written.__doc__:
        namespace["__doc__"] = f"{written.__name__}({', '.join(f.name for f in field_list)})"
    cls: type = type(written)(written.__name__, written.__bases__, namespace)
    cls.__qualname__ = written.__qualname__
    if frozen:
        names = frozenset(f.name for f in field_list)
        setattr(cls, "__setattr__", _frozen_setattr(cls, names))  # noqa: B010
        setattr(cls, "__delattr__", _frozen_delattr(cls, names))  # noqa: B010
    if init and "__init__" not in written.__dict__:
        setattr(cls, "__init__", _LazyInit(cls, *_init_source(cls, field_list)))  # noqa: B010
    if isinstance(cls, abc.ABCMeta):
        abc.update_abstractmethods(cast("type[object]", cls))
    MADE[cls] = (written, kw_only)
    return cls


def _is_real(made: Field[object]) -> bool:
    """Whether ``made`` is a field of the instances (not a class variable)."""
    return getattr(made, "_field_type") is _REAL_FIELD  # noqa: B009 (a private attribute)


def _slots_of(base: type) -> tuple[str, ...]:
    slots = base.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _init_source(
    cls: type, field_list: list[Field[object]]
) -> tuple[str, tuple[str, ...], dict[str, object]]:
    """The source of the ``__init__`` the dataclass would write, setting each slot by its
    descriptor, with its parameters named by position (``_a0``, ...), their names (in the
    order of the signature), and the names it reads. Checked here, as the class is made:
    compiling it waits for :class:`_LazyInit`."""
    scope: dict[str, object] = {"_FACTORY": _FACTORY}
    positional: list[tuple[str, str]] = []
    keywords: list[tuple[str, str]] = []
    by_name = {
        f.name: f"_a{position}"
        for position, f in enumerate(
            [f for f in field_list if f.init and not f.kw_only]
            + [f for f in field_list if f.init and f.kw_only]
        )
    }
    body: list[str] = []
    seen_default = ""
    for index, f in enumerate(field_list):
        slot = getattr(cls, f.name)
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{f.name}: not a slot")
        scope[f"_set{index}"] = slot.__set__
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        name = by_name.get(f.name, "")
        if f.default is not MISSING:
            scope[f"_default{index}"] = f.default
            value = name if f.init else f"_default{index}"
            parameter = f"{name}=_default{index}"
        elif f.default_factory is not MISSING:
            scope[f"_factory{index}"] = f.default_factory
            value = f"_factory{index}()"
            if f.init:
                value = f"{value} if {name} is _FACTORY else {name}"
            parameter = f"{name}=_FACTORY"
        else:
            value = name
            parameter = name
        if f.init:
            if not f.kw_only:
                if seen_default and not has_default:
                    raise TypeError(f"non-default argument {f.name!r} follows default argument")
                seen_default = seen_default or (f.name if has_default else "")
            (keywords if f.kw_only else positional).append((f.name, parameter))
        elif not has_default:
            continue
        body.append(f"    _set{index}(self, {value})")
    parameters = [parameter for _, parameter in positional]
    if keywords:
        parameters += ["*", *(parameter for _, parameter in keywords)]
    signature = ", ".join(["self", *parameters])
    names = tuple(name for name, _ in [*positional, *keywords])
    return f"def __init__({signature}):\n" + "\n".join(body or ["    pass"]), names, scope


#: Each ``__init__`` source compiled so far. The source names the parameters by position
#: (``_a0``, ``_a1``, ...; the fields' names go in after), so classes whose ``__init__`` has
#: the same shape share one compile: 51 shapes for about 140 classes.
_COMPILED: dict[str, CodeType] = {}


class _LazyInit:
    """A class's generated ``__init__`` until it is first looked up (to make an object, or
    by ``inspect.signature``): then compiled, put on the class in its place and returned.
    ``import flowc`` makes about 150 classes and a compile builds objects of about half of
    them; compiling each ``__init__`` is most of the time a class takes to make.
    Two threads may both compile it: each puts the same function on the class. The
    function is the one the source with the fields' names would make: only its
    parameters' names differ, and they are set on its code (and its keyword-only
    defaults)."""

    __slots__ = ("_cls", "_names", "_scope", "_source")

    def __init__(
        self, cls: type, source: str, names: tuple[str, ...], scope: dict[str, object]
    ) -> None:
        self._cls = cls
        self._source = source
        self._names = names
        self._scope = scope

    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., None]:
        code = _COMPILED.get(self._source)
        if code is None:
            code = _COMPILED.setdefault(self._source, compile(self._source, "<string>", "exec"))
        made: dict[str, Callable[..., None]] = {}
        exec(code, self._scope, made)
        method = made["__init__"]
        method.__code__ = method.__code__.replace(co_varnames=("self", *self._names))
        if method.__kwdefaults__:  # by the parameters' names: _a3 -> the field's
            method.__kwdefaults__ = {
                self._names[int(position[2:])]: value
                for position, value in method.__kwdefaults__.items()
            }
        method.__qualname__ = f"{self._cls.__qualname__}.__init__"
        method.__module__ = self._cls.__module__
        setattr(self._cls, "__init__", method)  # noqa: B010
        bound: Callable[..., None] = method.__get__(instance, owner)
        return bound


def _tuple_getter(names: list[str]) -> Callable[[object], tuple[object, ...]]:
    """A function giving an object's values of ``names`` as a tuple."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda self: (getattr(self, name),)
    return lambda self: ()


def _repr_method(names: list[str]) -> Callable[[object], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: object) -> str:
        key = (id(self), get_ident())
        if key in running:
            return "..."
        running.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_method(names: list[str]) -> Callable[[object, object], object]:
    values = _tuple_getter(names)

    def __eq__(self: object, other: object) -> object:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_method(names: list[str]) -> Callable[[object], int]:
    values = _tuple_getter(names)

    def __hash__(self: object) -> int:
        return hash(values(self))

    return __hash__


def _frozen_setattr(cls: type, names: frozenset[str]) -> Callable[[object, str, object], None]:
    def __setattr__(self: object, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    return __setattr__


def _frozen_delattr(cls: type, names: frozenset[str]) -> Callable[[object, str], None]:
    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return __delattr__


def _getstate(self: object) -> list[object]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]  # type: ignore[arg-type]


def _setstate(self: object, state: list[object]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):  # type: ignore[arg-type]
        object.__setattr__(self, f.name, value)
