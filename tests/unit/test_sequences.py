from autoscaler.core.sequences import count_after


def test_count_after_finds_the_item_by_identity_from_the_end():
    a, b, c = object(), object(), object()
    assert count_after((a, b, c), c) == 0
    assert count_after((a, b, c), a) == 2
    assert count_after((a, b), c) is None
    assert count_after((a, b, c), a, within=2) is None  # not among the last two
    assert count_after([1000.5], float("1000.5")) is None  # equal is not the same item
