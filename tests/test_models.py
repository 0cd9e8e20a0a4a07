"""cudatx.models.Frozen: its methods do what dataclasses writes for frozen=True, kw_only=True.

Each case builds the same class twice, as a Frozen model and as a plain frozen, keyword-only
dataclass, both named `Model`, and holds the two to the same behaviour: construction (and
each way it is refused), equality, hashing, repr, assignment, replace(), fields(), asdict(),
copying; and a model pickles and pydantic validates one.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from cudatx.models import Finding, Frozen

Case = tuple[str, Callable[[type], type], list[dict[str, Any]], list[dict[str, Any]]]


def _both(body: Callable[..., type], kw_only: bool = True) -> tuple[type, type]:
    """The class `body` makes on `base`, on Frozen and as a frozen dataclass."""
    frozen = body(Frozen) if kw_only else body(Frozen, kw_only=False)
    plain = dataclasses.dataclass(frozen=True, kw_only=kw_only)(body(object))
    return frozen, plain


def _none(base: type) -> type:
    class Model(base):  # type: ignore[valid-type,misc]
        pass

    return Model


def _one(base: type) -> type:
    class Model(base):  # type: ignore[valid-type,misc]
        name: str

    return Model


def _many(base: type, **options: bool) -> type:
    class Model(base, **options):  # type: ignore[valid-type,misc]
        name: str
        size: int = 0
        tags: tuple[str, ...] = ()
        extra: list[int] = dataclasses.field(default_factory=list, compare=False, repr=False)

    return Model


CASES: list[Case] = [
    ("no fields", _none, [{}], [{"name": "x"}]),
    ("one field", _one, [{"name": "a"}, {"name": "b"}], [{}, {"name": "a", "size": 1}]),
    (
        "defaults, a factory, a field not compared",
        _many,
        [
            {"name": "a"},
            {"name": "a", "size": 2},
            {"name": "a", "tags": ("x",), "extra": [1]},
            {"name": "a", "extra": [2]},
            {"name": "b", "size": 2},
        ],
        [{}, {"size": 1}, {"name": "a", "nope": 1}],
    ),
]


def _outcome(make: Callable[[], Any]) -> tuple[str, str]:
    try:
        made = make()
    except TypeError as exc:
        return "TypeError", str(exc)
    return "made", repr(made)


@pytest.mark.parametrize(("title", "body", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_a_frozen_model_behaves_as_a_frozen_keyword_only_dataclass(
    title: str, body: Callable[[type], type], good: list[dict[str, Any]], bad: list[dict[str, Any]]
) -> None:
    frozen, plain = _both(body)
    for values in good:
        a, b = frozen(**values), plain(**values)
        assert repr(a) == repr(b)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
        assert copy.deepcopy(a) == a and copy.copy(a) == a
        for name in [f.name for f in dataclasses.fields(a)] + ["other"]:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(a, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(a, name)
        for other in good:
            same = plain(**values) == plain(**other)
            assert (frozen(**values) == frozen(**other)) is same, (values, other)
            if same:
                assert hash(frozen(**values)) == hash(frozen(**other))
        assert a != b and b != a  # another class: never equal, as dataclasses says
        if dataclasses.fields(a):
            changed = {dataclasses.fields(a)[0].name: "z"}
            assert repr(dataclasses.replace(a, **changed)) == repr(
                dataclasses.replace(b, **changed)
            )
    for values in bad:
        assert _outcome(lambda: frozen(**values))[0] == "TypeError"  # noqa: B023
        assert _outcome(lambda: plain(**values))[0] == "TypeError"  # noqa: B023
    with pytest.raises(TypeError):
        frozen("positional")
    assert {frozen(**v) for v in good} == {frozen(**v) for v in good}


def test_init_false_fields_and_post_init_run_as_in_a_dataclass() -> None:
    seen: list[str] = []

    class Model(Frozen):
        name: str
        later: int = dataclasses.field(init=False, default=5)
        made: list[int] = dataclasses.field(init=False, default_factory=list)

        def __post_init__(self) -> None:
            seen.append(self.name)

    model = Model(name="a")
    assert (model.later, model.made, seen) == (5, [], ["a"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'later'"):
        Model(name="a", later=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'name'"):
        Model()  # type: ignore[call-arg]


def test_pydantic_validates_a_frozen_model_and_refuses_an_unknown_field() -> None:
    class Model(Frozen):
        name: str
        size: int = 0

    adapter = TypeAdapter(Model)
    assert adapter.validate_python({"name": "a", "size": 2}) == Model(name="a", size=2)
    with pytest.raises(ValidationError):
        adapter.validate_python({"name": "a", "nope": 1})
    assert adapter.dump_python(Model(name="a")) == {"name": "a", "size": 0}


def test_a_model_pickles() -> None:
    finding = Finding(kind="unreadable", path="/x", message="denied")
    assert pickle.loads(pickle.dumps(finding)) == finding


def test_a_model_of_kw_only_false_takes_its_fields_in_order_as_a_dataclass_does() -> None:
    frozen, plain = _both(_many, kw_only=False)
    for args, values in [
        (("a",), {}),
        (("a", 2), {"tags": ("x",)}),
        (("a", 2, ("y",), [1]), {}),
        ((), {"name": "a"}),
        (("a",), {"name": "b"}),
        (("a", 1, (), [], 5), {}),
        (("a",), {"nope": 1}),
    ]:
        ours = _outcome(lambda: frozen(*args, **values))  # noqa: B023
        theirs = _outcome(lambda: plain(*args, **values))  # noqa: B023
        # The same object made, or a TypeError both (worded a little otherwise).
        assert ours[0] == theirs[0] and (ours == theirs or ours[0] == "TypeError"), (args, values)
