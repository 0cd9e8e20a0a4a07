"""Frozen models as JSON and back without pydantic, for what every run reads.

A run reads the scan cache's entries (cudatx.cache) and the target interpreter's answer
(cudatx.discover.target) before anything else. Importing pydantic and building its first
validator took 110 ms, a third of a warm `remove --dry-run` on torch 2.14.1; the models are
plain frozen dataclasses (cudatx.models.Frozen), so these two readers need none of it.
Documents a user reads or keeps (reports, journals, snapshots, trace records) go through
pydantic in cudatx.documents, where its messages serve users.

decode() checks what it builds against the fields' annotations, for the types the models
hold: str, int, bool, None, a StrEnum, tuple[X, ...], fixed tuples, dict[K, V], X | None, a
Frozen model and a NamedTuple (a JSON array). Anything else raises Invalid, naming where.
encode() leaves out fields at their defaults: decode() puts them back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from cudatx.models import Frozen

_T = TypeVar("_T")
_Convert = Callable[[Any], Any]
_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    type(None): "null",
}


class Invalid(ValueError):
    """A value decode() cannot take: `where` is the path to it (field names, item indexes)."""

    def __init__(self, why: str, where: tuple[str | int, ...] = ()) -> None:
        super().__init__(why)
        self.why = why
        self.where = where

    def inside(self, step: str | int) -> Invalid:
        return Invalid(self.why, (step, *self.where))

    def __str__(self) -> str:
        where = ".".join(str(step) for step in self.where)
        return f"{where}: {self.why}" if where else self.why


def _plain(value: object) -> object:
    """json.dumps' fallback: a model as an object of its fields not at their defaults."""
    if isinstance(value, Frozen):
        out = {}
        for field in _fields(type(value)):
            item = getattr(value, field.name)
            if field.default is dataclasses.MISSING or item != field.default:
                out[field.name] = item
        return out
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(value: object) -> str:
    """`value` (a model, or tuples and dicts of them) as compact JSON. Non-ASCII text, and
    the surrogates of a file name that is not UTF-8, are written as escapes."""
    return json.dumps(value, default=_plain, separators=(",", ":"))


def decode(kind: type[_T], text: str | bytes) -> _T:
    """The `kind` that `text` holds; Invalid when it holds something else."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise Invalid("not JSON") from None
    return convert(kind, data)


def convert(kind: type[_T], data: object) -> _T:
    """The `kind` that `data` (as json.loads gives it) describes; Invalid when it does not."""
    result: _T = _converter(kind)(data)
    return result


def _fields(kind: type[Frozen]) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(kind)  # type: ignore[arg-type]  # each subclass is a dataclass


def _shape(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


_CONVERTERS: dict[object, _Convert] = {}


def _converter(kind: Any) -> _Convert:
    convert_kind = _CONVERTERS.get(kind)
    if convert_kind is None:
        convert_kind = _CONVERTERS[kind] = _new_converter(kind)
    return convert_kind


def _new_converter(kind: Any) -> _Convert:
    if kind is Any:
        return lambda value: value
    if kind is type(None) or kind is None:
        return _exactly(type(None))
    if kind in (str, int, bool):
        return _exactly(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return _optional(kind, args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _sequence(_converter(args[0]))
        return _fixed(tuple(_converter(arg) for arg in args), lambda items: tuple(items))
    if origin is dict:
        return _mapping(_converter(args[0]), _converter(args[1]))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return _enum(kind)
    if isinstance(kind, type) and issubclass(kind, Frozen):
        return _model(kind)
    if isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return _named_tuple(kind)
    raise TypeError(f"cudatx.codec has no rule for {kind!r}")  # a model this module missed


def _exactly(kind: type) -> _Convert:
    def scalar(value: object) -> object:
        if type(value) is kind:  # not isinstance: True is no integer here, as in JSON
            return value
        raise Invalid(f"expected {_JSON_TYPES[kind]}, got {_shape(value)}")

    return scalar


def _optional(kind: Any, args: tuple[Any, ...]) -> _Convert:
    options = [arg for arg in args if arg is not type(None)]
    if len(options) != 1:
        raise TypeError(f"cudatx.codec has no rule for {kind!r}")
    inner = _converter(options[0])
    return lambda value: None if value is None else inner(value)


def _items(convert_item: _Convert, values: list[Any]) -> list[Any]:
    out = []
    for index, item in enumerate(values):
        try:
            out.append(convert_item(item))
        except Invalid as exc:
            raise exc.inside(index) from None
    return out


def _sequence(convert_item: _Convert) -> _Convert:
    def sequence(value: object) -> tuple[Any, ...]:
        if type(value) is not list:
            raise Invalid(f"expected an array, got {_shape(value)}")
        return tuple(_items(convert_item, value))

    return sequence


def _fixed(converters: tuple[_Convert, ...], build: Callable[[list[Any]], Any]) -> _Convert:
    def fixed(value: object) -> Any:
        if type(value) is not list or len(value) != len(converters):
            raise Invalid(f"expected an array of {len(converters)}, got {_shape(value)}")
        out = []
        for index, (convert_item, item) in enumerate(zip(converters, value, strict=True)):
            try:
                out.append(convert_item(item))
            except Invalid as exc:
                raise exc.inside(index) from None
        return build(out)

    return fixed


def _mapping(convert_key: _Convert, convert_value: _Convert) -> _Convert:
    def mapping(value: object) -> dict[Any, Any]:
        if type(value) is not dict:
            raise Invalid(f"expected an object, got {_shape(value)}")
        out = {}
        for key, item in value.items():
            try:
                out[convert_key(key)] = convert_value(item)
            except Invalid as exc:
                raise exc.inside(key) from None
        return out

    return mapping


def _enum(kind: type[Enum]) -> _Convert:
    def member(value: object) -> Enum:
        try:
            return kind(value)
        except ValueError:
            raise Invalid(f"not a {kind.__name__}: {value!r}") from None

    return member


def _model(kind: type[Frozen]) -> _Convert:
    hints = typing.get_type_hints(kind)
    fields = _fields(kind)
    converters = {field.name: _converter(hints[field.name]) for field in fields}
    required = frozenset(
        field.name
        for field in fields
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )

    def model(value: object) -> Frozen:
        if type(value) is not dict:
            raise Invalid(f"expected an object, got {_shape(value)}")
        out = {}
        for name, item in value.items():
            convert_field = converters.get(name)
            if convert_field is None:
                raise Invalid("no such field", (name,))
            try:
                out[name] = convert_field(item)
            except Invalid as exc:
                raise exc.inside(name) from None
        if not required <= out.keys():
            raise Invalid("missing", (min(required - out.keys()),))
        return kind(**out)

    return model


def _named_tuple(kind: type[tuple[Any, ...]]) -> _Convert:
    hints = typing.get_type_hints(kind)
    names: tuple[str, ...] = kind._fields  # type: ignore[attr-defined]
    converters = tuple(_converter(hints[name]) for name in names)
    return _fixed(converters, lambda items: kind(*items))


def document(value: object, *, indent: int = 2) -> str:
    """`value` (a model, or tuples and dicts of them) as the JSON document a user reads
    (`--json`), byte for byte as pydantic's `dump_json(indent=...)` writes it (every field in
    declaration order but one declared with `metadata={"exclude": True}`, which pydantic
    leaves out too, enums as their values, tuples as arrays, floats as pydantic-core
    writes them), without importing pydantic: a report written for a user needs no validation
    on the way out, and building pydantic's serializer for a plan cost 0.1 s of every `--json`
    run (issue 36). Where pydantic would fail (a file name that is not UTF-8, held as
    surrogates), the surrogate is written as its escape. tests/test_codec.py holds the two
    writers to the same bytes."""
    out: list[str] = []
    _write(value, "\n", " " * indent, out)
    return "".join(out)


def plain(value: object) -> Any:
    """`value` as plain data (dicts, lists, scalars) for a document built around it: what
    `document` writes, read back. As pydantic's `dump(mode="json")` but for a float JSON has
    no number for (inf, nan): None, where pydantic kept the float and json.dumps then wrote
    `Infinity`, which no JSON reader takes."""
    return json.loads(document(value))


def _write(value: object, newline: str, step: str, out: list[str]) -> None:
    if isinstance(value, Enum):
        value = value.value
    if value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, str):
        out.append(_SURROGATE.sub(_escape, json.dumps(value, ensure_ascii=False)))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, Frozen):
        floats = _float_fields(type(value))
        pairs = [
            (name, float(item) if name in floats and type(item) is int else item)
            for name, item in (
                (field.name, getattr(value, field.name))
                for field in _fields(type(value))
                if not field.metadata.get("exclude")
            )
        ]
        _object(pairs, newline, step, out)
    elif isinstance(value, dict):
        _object([(_key(key), item) for key, item in value.items()], newline, step, out)
    elif isinstance(value, tuple | list):
        if not value:
            out.append("[]")
            return
        inner = newline + step
        out.append("[")
        for index, item in enumerate(value):
            out.append(("," if index else "") + inner)
            _write(item, inner, step, out)
        out.append(newline + "]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")  # a model this missed


def _object(pairs: list[tuple[str, object]], newline: str, step: str, out: list[str]) -> None:
    if not pairs:
        out.append("{}")
        return
    inner = newline + step
    out.append("{")
    for index, (key, item) in enumerate(pairs):
        out.append(("," if index else "") + inner)
        _write(key, inner, step, out)
        out.append(": ")
        _write(item, inner, step, out)
    out.append(newline + "}")


_FLOAT_FIELDS: dict[type[Frozen], frozenset[str]] = {}


def _float_fields(kind: type[Frozen]) -> frozenset[str]:
    """The fields annotated `float` (or `float | None`): pydantic writes an int held there
    as a float (0 as 0.0), by the annotation."""
    names = _FLOAT_FIELDS.get(kind)
    if names is None:
        hints = typing.get_type_hints(kind)
        names = _FLOAT_FIELDS[kind] = frozenset(
            name for name, hint in hints.items() if hint is float or float in typing.get_args(hint)
        )
    return names


def _key(key: object) -> str:
    if isinstance(key, Enum):
        key = key.value
    return key if isinstance(key, str) else json.dumps(key)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _float(value: float) -> str:
    """As pydantic-core writes a float: null where JSON has no number (inf, nan); Python's
    repr otherwise, except that a negative exponent is written without its zero padding
    (2.5e-7), and an exponent of -5 as a decimal (0.000015)."""
    if not math.isfinite(value):
        return "null"
    text = repr(value)
    mantissa, e, exponent = text.partition("e-")
    if not e:
        return text
    power = int(exponent)
    if power != 5:
        return f"{mantissa}e-{power}"
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    return f"{sign}0.0000{digits}"
