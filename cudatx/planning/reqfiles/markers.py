"""Environment markers evaluated as uv 0.13 evaluates them, the same under every packaging.

packaging parses the marker (its grammar has not changed since 22); its evaluation has: 26.0
made ordered comparisons of string fields false and stopped parsing some fields as versions
(pypa/packaging#939), so `sys_platform < 'win32'` held under packaging 25 and not under 26.
cudatx's answer must not depend on which packaging a user has, and must be uv's, which
installs what the file asks for. uv's rules (crates/uv-pep508/src/marker/parse.rs and
algebra.rs `from_string`):

- version fields (`python_version`, `python_full_version`, `implementation_version`)
  compare as PEP 440 versions; `in`/`not in` a whitespace-separated list of versions; a
  value that is no version, or a comparison of two fields or two strings, is ignored (left
  out of its `and`/`or`, as if not written);
- string fields compare `==`/`!=` as strings, `in`/`not in` as substrings; `<`/`>` are
  false and `<=`/`>=` are `==` (the marker specification), except `platform_release` and
  `platform_version`, which order as strings; `~=` is ignored;
- `extra` compares names normalised (`==`/`!=` only); `extras` and `dependency_groups`
  (PEP 751 lock files) hold sets of names for `in`/`not in`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.markers import Marker
from packaging.specifiers import InvalidSpecifier, Specifier
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

_VERSION_KEYS = {"python_version", "python_full_version", "implementation_version"}
_ORDERED_STRINGS = {"platform_release", "platform_version"}
_LISTS = {"extras", "dependency_groups"}
_INVERTED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!=", "~=": "~="}


class UndefinedKey(Exception):
    """The marker names a field the environment does not give."""


def evaluate(marker: Marker, environment: Mapping[str, Any]) -> bool:
    found = _group(marker._markers, environment)
    return True if found is None else found


def _group(items: list[Any], env: Mapping[str, Any]) -> bool | None:
    """`a and b or c`: `and` binds tighter. None where every term is ignored."""
    alternatives: list[list[Any]] = [[]]
    for item in items:
        if item == "or":
            alternatives.append([])
        elif item != "and":
            alternatives[-1].append(item)
    held: list[bool] = []
    for terms in alternatives:
        values = [v for v in (_term(t, env) for t in terms) if v is not None]
        if values:
            held.append(all(values))
    return any(held) if held else None


def _term(item: Any, env: Mapping[str, Any]) -> bool | None:
    if isinstance(item, list):
        return _group(item, env)
    left, op, right = item
    operator = str(op.value)
    left_key, right_key = _is_key(left), _is_key(right)
    if left_key == right_key:
        return None  # two fields, or two strings: uv ignores the comparison
    if left_key:
        return _compare(str(left.value), operator, str(right.value), env, inverted=False)
    if operator in ("in", "not in"):
        return _compare(str(right.value), operator, str(left.value), env, inverted=True)
    if operator not in _INVERTED:
        return None
    return _compare(str(right.value), _INVERTED[operator], str(left.value), env, inverted=False)


def _is_key(node: Any) -> bool:
    return type(node).__name__ == "Variable"


def _field(key: str, env: Mapping[str, Any]) -> Any:
    if key not in env:
        raise UndefinedKey(key)
    return env[key]


def _compare(
    key: str, operator: str, value: str, env: Mapping[str, Any], *, inverted: bool
) -> bool | None:
    """`key OPERATOR value`, or for `inverted`, `value OPERATOR key` (`in`/`not in` only)."""
    negate = operator == "not in"
    if key in _LISTS:
        if not inverted or operator not in ("in", "not in"):
            return None
        names = {canonicalize_name(str(n)) for n in _field(key, env) or ()}
        return (canonicalize_name(value) in names) != negate
    actual = str(_field(key, env))
    if key == "extra":
        if operator not in ("==", "!="):
            return None
        same = bool(actual) and canonicalize_name(actual) == canonicalize_name(value)
        return same if operator == "==" else not same
    if key in _VERSION_KEYS:
        return _version(actual, operator, value, inverted=inverted)
    if operator in ("in", "not in"):
        inside = value in actual if inverted else actual in value
        return inside != negate
    if operator == "~=":
        return None
    if operator in ("==", "==="):
        return actual == value
    if operator == "!=":
        return actual != value
    if key in _ORDERED_STRINGS:
        return {"<": actual < value, "<=": actual <= value, ">": actual > value}.get(
            operator, actual >= value
        )
    return actual == value if operator in ("<=", ">=") else False


def _version(actual: str, operator: str, value: str, *, inverted: bool) -> bool | None:
    try:
        have = Version(actual)
    except InvalidVersion:
        return None  # a target whose version is not PEP 440: cannot say
    if operator in ("in", "not in"):
        if inverted:
            return None  # '3.11' in python_version: a version is no list
        try:
            listed = {Version(v) for v in value.split()}
        except InvalidVersion:
            return None
        return (have in listed) != (operator == "not in")
    try:
        specifier = Specifier(f"{operator}{value}")
    except InvalidSpecifier:
        return None  # `python_version > 'x'`: uv leaves it out
    return specifier.contains(have, prereleases=True)
