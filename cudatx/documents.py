"""Models as the JSON documents users read and cudatx keeps, through pydantic.

Journals, snapshot manifests and trace records are written and validated here: pydantic
checks a document against the models' annotations (an unknown field is an error:
cudatx.models.Frozen) and says what is wrong in words. It is imported only where such a
document is written or read. A `--json` report a user reads is only written, never read
back, and needs no validation: cudatx.codec.document writes the same bytes without
pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_T = TypeVar("_T")


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter


def dump_json(value: object, *, indent: int | None = None) -> str:
    """`value` (a model) as pydantic writes it: fields in declaration order, enums as
    their values, tuples as arrays."""
    return _adapter(type(value)).dump_json(value, indent=indent).decode()


def dump(value: object, *, mode: Literal["json", "python"] = "python") -> Any:
    """`value` as plain data: dicts, lists and scalars in "json" mode."""
    return _adapter(type(value)).dump_python(value, mode=mode)


def load_json(kind: type[_T], text: str | bytes) -> _T:
    """The `kind` that `text` holds; pydantic's ValidationError (a ValueError) when not."""
    result: _T = _adapter(kind).validate_json(text)
    return result


def load(kind: type[_T], data: object) -> _T:
    result: _T = _adapter(kind).validate_python(data)
    return result
