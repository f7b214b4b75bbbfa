import bisect
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.sequences import Timeline, count_after


def test_count_after_finds_the_item_by_identity_from_the_end():
    a, b, c = object(), object(), object()
    assert count_after((a, b, c), c) == 0
    assert count_after((a, b, c), a) == 2
    assert count_after((a, b), c) is None
    assert count_after((a, b, c), a, within=2) is None  # not among the last two
    assert count_after([1000.5], float("1000.5")) is None  # equal is not the same item


# --- Timeline: the scaling history's recommendations ---------------------------------------------

# a history of steps: append an item (the next number) or cut some from the front
steps = st.lists(st.one_of(st.just("append"), st.integers(min_value=0, max_value=80)), max_size=400)


def build(ops, start=()):
    timeline, model, n = Timeline(start), tuple(start), len(start)
    for op in ops:
        if op == "append":
            timeline, model, n = timeline.appended(n), model + (n,), n + 1
        else:
            timeline, model = timeline.cut(op), model[op:]
    return timeline, model


@given(steps, st.integers(min_value=0, max_value=100))
def test_a_timeline_holds_what_a_tuple_built_the_same_way_holds(ops, initial):
    timeline, model = build(ops, tuple(range(-initial, 0)))
    assert len(timeline) == len(model) and tuple(timeline) == model and timeline == model
    assert list(reversed(timeline)) == list(reversed(model))
    for i in range(-len(model), len(model)):
        assert timeline[i] == model[i]
    assert timeline[1:-1:2] == model[1:-1:2]
    for probe in (-200, -1, 0, 3, 50, 10_000) + model[:3] + model[-3:]:
        assert timeline.bisect_left(probe) == bisect.bisect_left(model, probe)
    assert pickle.loads(pickle.dumps(timeline)) == timeline and hash(timeline) == hash(model)


@given(steps)
def test_an_append_copies_at_most_a_chunk(ops):
    timeline, _ = build(ops)
    assert len(timeline._tail) < Timeline.CHUNK  # the rest sits in one shared part


def test_a_timeline_refuses_indexes_beyond_its_ends_and_equals_only_sequences_of_its_items():
    t = Timeline((1, 2)).appended(3).cut(1)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[-3]
    assert t == (2, 3) and t == Timeline([2, 3]) and t != (2,) and t != [2, 3] and repr(t) == "Timeline((2, 3))"
