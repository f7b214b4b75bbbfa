import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.capacity import (
    aligned_parallelism,
    effective_slots,
    min_cores_for,
    wave_efficiency,
)


@pytest.mark.parametrize(
    "partitions, cores, expected",
    [
        pytest.param(8, 1, 1.0, id="one-core-runs-eight-waves"),
        pytest.param(8, 3, 8 / 3, id="three-cores-three-waves-like-2.67"),  # ceil(8/3)=3 waves -> 8/3
        pytest.param(8, 4, 4.0, id="four-cores-two-full-waves"),
        pytest.param(8, 6, 4.0, id="six-cores-perform-like-four"),  # ceil(8/6)=2 waves -> 4
        pytest.param(8, 16, 8.0, id="more-cores-than-partitions-capped"),
        pytest.param(0, 4, 0.0, id="no-partitions"),
    ],
)
def test_effective_slots_follow_task_waves(partitions, cores, expected):
    assert effective_slots(partitions, cores) == pytest.approx(expected)


@pytest.mark.parametrize(
    "partitions, needed, expected",
    [
        pytest.param(8, 0.5, 1, id="below-one-slot-needs-one-core"),
        pytest.param(8, 2.5, 3, id="2.5-slots-three-cores-give-2.67"),
        pytest.param(8, 3.0, 4, id="three-slots-need-four-cores-since-three-give-2.67"),
        pytest.param(8, 4.0, 4, id="four-slots-four-cores"),
        pytest.param(8, 4.1, 8, id="just-above-four-needs-eight"),
        pytest.param(8, 8.5, None, id="more-than-partitions-impossible"),
        pytest.param(12, 5.0, 6, id="twelve-partitions-six-cores"),
    ],
)
def test_min_cores_for_picks_the_smallest_aligned_count(partitions, needed, expected):
    assert min_cores_for(partitions, needed) == expected


@pytest.mark.parametrize(
    "cores, per_core, lo, hi, expected",
    [
        pytest.param(3, 2, 1, 64, 6, id="two-per-core"),
        pytest.param(5, 1, 1, 64, 5, id="one-per-core"),
        pytest.param(6, 2, 1, 8, 6, id="cap-keeps-whole-multiple"),
        pytest.param(3, 1, 4, 64, 4, id="floor-at-min"),
        pytest.param(10, 1, 1, 8, 8, id="cap-below-cores"),
    ],
)
def test_aligned_parallelism_is_a_multiple_of_cores_within_bounds(cores, per_core, lo, hi, expected):
    assert aligned_parallelism(cores, per_core, lo, hi) == expected


@given(st.integers(1, 200), st.integers(1, 200))
def test_wave_efficiency_is_a_share(partitions, cores):
    e = wave_efficiency(partitions, cores)
    assert 0 < e <= 1.0 + 1e-12


@given(st.integers(1, 120), st.floats(0.01, 120))
def test_min_cores_for_is_minimal_and_sufficient(partitions, needed):
    cores = min_cores_for(partitions, needed)
    if cores is None:
        assert needed > partitions
        return
    assert effective_slots(partitions, cores) >= needed - 1e-9
    assert cores == 1 or effective_slots(partitions, cores - 1) < needed - 1e-9
    assert cores <= max(1, math.ceil(partitions))
