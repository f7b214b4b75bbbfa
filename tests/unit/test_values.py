"""``@value``: a frozen dataclass with a fast ``__init__`` behaves as ``dataclass(frozen=True)``."""

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from autoscaler.core.values import replace, value


def point_class(decorate):
    """The same class body under ``decorate``: ``@value`` or the frozen dataclass it must match."""

    @decorate
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = field(default_factory=tuple)
        seen: list[int] = field(default_factory=list)
        total: int = field(init=False, default=0)
        label: str = field(init=False, repr=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "label", f"{self.x},{self.y}")

    Point.__qualname__ = "Point"  # as if defined at module level (repr shows it)
    return Point


Point = point_class(value)
Reference = point_class(dataclass(frozen=True, slots=True))


def as_tuple(obj):
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj)) + (obj.label,)


@pytest.mark.parametrize(
    "args, kwargs",
    [((1,), {}), ((1, 5), {}), ((1,), {"y": 7, "tags": ("a",)}), ((), {"x": 3, "seen": [1]})],
)
def test_fields_defaults_factories_and_post_init_match_a_frozen_dataclass(args, kwargs):
    assert as_tuple(Point(*args, **kwargs)) == as_tuple(Reference(*args, **kwargs))


def test_it_stays_frozen_equal_hashable_and_replaceable():
    p = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    assert p == Point(1) and p != Point(2)
    assert (Point.__hash__ is None) == (Reference.__hash__ is None)  # frozen + eq: hashed by fields
    q = dataclasses.replace(p, y=9)
    assert (q.x, q.y, q.label) == (1, 9, "1,9") and p.y == 2
    assert Point(1).seen is not Point(1).seen  # a fresh default per instance
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=(), seen=[], total=0)"


def test_bad_calls_fail_like_any_function():
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, total=3)  # type: ignore[call-arg]  # not an init field
    with pytest.raises(TypeError, match="keyword-only"):

        @value
        class KwOnly:
            a: int = field(kw_only=True)


@pytest.mark.parametrize("changes", [{}, {"y": 9}, {"x": 4, "tags": ("b",)}, {"seen": [5], "y": 0}])
def test_replace_matches_dataclasses_replace(changes):
    p, r = Point(1, tags=("a",), seen=[1]), Reference(1, tags=("a",), seen=[1])
    kept = dict(changes)
    new = replace(p, **changes)
    assert type(new) is Point and new is not p
    assert as_tuple(new) == as_tuple(dataclasses.replace(r, **changes))  # __post_init__ ran again
    assert changes == kept and as_tuple(p) == as_tuple(Point(1, tags=("a",), seen=[1]))
    assert new.seen is (changes["seen"] if "seen" in changes else p.seen)  # values carried, not copied


def test_replace_refuses_what_dataclasses_replace_refuses():
    with pytest.raises(ValueError, match="init=False"):
        replace(Point(1), total=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        replace(Point(1), y=3, z=4)


def test_replace_falls_back_to_dataclasses_for_other_classes():
    assert replace(Reference(1), y=5) == Reference(1, 5)


def test_a_value_has_slots_and_no_instance_dict():
    p = Point(1)
    assert not hasattr(p, "__dict__") and Point.__slots__ == Reference.__slots__


def test_a_value_pickles_and_copies():
    p = Point(1, 5, ("a",), [2])
    assert as_tuple(pickle.loads(pickle.dumps(p))) == as_tuple(p)
    assert as_tuple(copy.deepcopy(p)) == as_tuple(p) and copy.copy(p) == p
