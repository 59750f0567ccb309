"""The JSON form of a frozen dataclass record, field by field in declaration order, and
the record read back from it.

Records of the state manifest and of ``flowc diff`` are many and alike; written out by
hand, each ``to_json`` / ``from_json`` pair repeated the same field list twice. A field's
type says how it is read: ``str``, ``int`` and ``bool`` are coerced, ``X | None`` may be
missing or null, ``tuple[X, ...]`` is a list, and a record type reads its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from enum import Enum
from functools import cache
from types import NoneType, UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Protocol,
    Self,
    TypeVar,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class _Readable(Protocol):
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self: ...


class JsonRecord:
    """A frozen dataclass whose JSON form is its fields (subclasses add or reorder)."""

    __slots__ = ()

    #: Fields read before the others (a damaged manifest's first error names them, as it
    #: did when each record was read by hand).
    read_first: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        return record_json(cast("DataclassInstance", self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return read_record(cls, data)


def record_json(record: DataclassInstance) -> dict[str, Any]:
    """Each field by name: records as their JSON, tuples as lists, enums as their value."""
    return {f.name: _json_value(getattr(record, f.name)) for f in fields(record)}


def _json_value(value: object) -> object:
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    return value


_R = TypeVar("_R")


def read_record(cls: type[_R], data: Mapping[str, Any]) -> _R:
    """The record ``cls`` from its JSON form; KeyError, TypeError or ValueError when the
    data is not one."""
    first: tuple[str, ...] = getattr(cls, "read_first", ())
    record_type: type = cls
    types = dict(_field_types(record_type))
    values = {name: _read_field(types[name], data, name) for name in first}
    for name, hint in types.items():
        if name not in values:
            values[name] = _read_field(hint, data, name)
    return cls(**values)


@cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """A record type's fields and their types, in declaration order (read once per type;
    functools' cache, like the compiler's other per-type memos, is safe across threads)."""
    hints = get_type_hints(cls)
    dataclass_fields = fields(cast("type[DataclassInstance]", cls))
    return tuple((f.name, hints[f.name]) for f in dataclass_fields)


def _read_field(hint: Any, data: Mapping[str, Any], name: str) -> object:
    if isinstance(hint, UnionType) and NoneType in get_args(hint):
        (inner,) = (arg for arg in get_args(hint) if arg is not NoneType)
        value = data.get(name)
        return None if value is None else _read_value(inner, value)
    return _read_value(hint, data[name])


def _read_value(hint: Any, value: Any) -> object:
    if hint in (str, int, bool):
        return hint(value)
    if get_origin(hint) is tuple:
        item_types = get_args(hint)
        if item_types[-1] is Ellipsis:
            return tuple(_read_value(item_types[0], item) for item in value)
        items = list(value)
        expected = len(item_types)
        if len(items) > expected:  # as unpacking says it
            raise ValueError(f"too many values to unpack (expected {expected})")
        if len(items) < expected:
            raise ValueError(f"not enough values to unpack (expected {expected}, got {len(items)})")
        return tuple(_read_value(t, item) for t, item in zip(item_types, items, strict=True))
    return cast("type[_Readable]", hint).from_json(value)
