"""The ``flink-autoscaler`` baseline against the Flink Kubernetes Operator's own tests.

Each case is a numeric assertion of ``JobVertexScalerTest`` (JVST), ``ScalingExecutorTest``
(SET), ``ScalingMetricEvaluatorTest`` (SMET) or ``AlignmentModeTest`` of
``apache/flink-kubernetes-operator`` (``flink-autoscaler/src/test/java/org/apache/flink/autoscaler/``,
release 1.15.0; ``AlignmentModeTest`` from ``main``, which pins the same ``EVENLY_SPREAD`` mode),
fed with Flink's literal inputs and expecting Flink's literal result. The case ids name the test
method and the numbering of ``../shared/notes/flink-baseline-fidelity.md``, which first ran
them. Where the port deliberately differs (the Spark adaptations of ``policies/flink_autoscaler.py``),
the case says so and pins the port's documented behaviour instead.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import BatchSample, Executor, ExecutorView, QueryLoad, Reason, Snapshot
from autoscaler.core.normalize import NormalizeInput, normalize
from autoscaler.core.policy import PolicyInput
from autoscaler.core.settings import NormalizeSettings
from policies import create_policy
from policies.flink_autoscaler import (
    VertexDecision,
    VertexMetrics,
    pool_proposal,
    processing_backlog,
    rate_thresholds,
    scale,
)
from tests.fakes import query_view

INT_MAX = 2**31 - 1
NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


def flink(**params):
    """The port configured as the Flink tests' ``setUp`` configures the scaler: catch-up duration 0
    (no catch-up and no restart term), scale-down max factor 1, scale-up max factor INT_MAX."""
    return create_policy("flink-autoscaler", {"catch_up_duration": "0s", "scale_down_max_factor": 1.0, "scale_up_max_factor": INT_MAX, **params})


# --- JVST.testParallelismScaling (:102): computeScaleTargetParallelism, catch-up 0, a keyed
# vertex with 720 key groups (its results are divisors of 720: 6.25 -> 7 -> 8 in case 1.2) ----------


@pytest.mark.parametrize(
    "util, current, target, tpr, down_max, up_max, new, outside",
    [
        pytest.param(1.0, 10, 50, 100, 1.0, INT_MAX, 5, True, id="1.1-util-1.0-halves"),
        pytest.param(0.8, 10, 50, 100, 1.0, INT_MAX, 8, False, id="1.2-util-0.8-inside"),
        pytest.param(0.8, 10, 80, 100, 1.0, INT_MAX, 10, False, id="1.3-no-change"),
        pytest.param(0.8, 10, 60, 100, 1.0, INT_MAX, 8, False, id="1.4"),
        pytest.param(0.8, 10, 59, 100, 1.0, INT_MAX, 8, False, id="1.5"),
        pytest.param(0.5, 2, 100, 40, 1.0, INT_MAX, 10, True, id="1.6-scale-up"),
        pytest.param(0.6, 2, 100, 100, 1.0, INT_MAX, 4, True, id="1.7"),
        pytest.param(1.0, 10, 10, 100, 0.5, INT_MAX, 5, True, id="1.8-scale-down-max-factor-0.5"),
        pytest.param(1.0, 10, 10, 100, 0.6, INT_MAX, 4, True, id="1.9-scale-down-max-factor-0.6"),
        pytest.param(1.0, 10, 200, 10, 1.0, 0.5, 15, True, id="1.10-scale-up-max-factor-0.5"),
        pytest.param(1.0, 10, 200, 10, 1.0, 0.6, 16, True, id="1.11-scale-up-max-factor-0.6"),
    ],
)
def test_jvst_parallelism_scaling(util, current, target, tpr, down_max, up_max, new, outside):
    policy = flink(target_utilization=util, catch_up_duration="0s", scale_down_max_factor=down_max, scale_up_max_factor=up_max)
    m = VertexMetrics(parallelism=current, tpr=tpr, target_rate=target, catch_up_rate=0.0)
    assert policy.vertex_change(m, partitions=0, max_parallelism=720, lower=1, upper=INT_MAX) == (new, outside if new != current else False)


# --- JobVertexScaler.scale with Flink's literal arguments ---------------------------------------


@pytest.mark.parametrize(
    "current, partitions, max_par, factor, lower, upper, aligned, expected",
    [
        # JVST.testParallelismComputation (:242): REBALANCE input, not aligned
        pytest.param(1, 0, 720, 0.0001, 1, INT_MAX, False, 1, id="2.1-testParallelismComputation"),
        pytest.param(2, 0, 720, 0.1, 1, INT_MAX, False, 1, id="2.2-testParallelismComputation"),
        pytest.param(6, 0, 720, 0.8, 1, INT_MAX, False, 5, id="2.3-testParallelismComputation"),
        pytest.param(16, 0, 128, 1.5, 1, INT_MAX, False, 24, id="2.4-testParallelismComputation"),
        pytest.param(200, 0, 720, 2, 1, INT_MAX, False, 400, id="2.5-testParallelismComputation"),
        pytest.param(200, 0, 720, INT_MAX, 1, INT_MAX, False, 720, id="2.6-testParallelismComputation"),
        # JVST.testParallelismComputationWithAdjustment (:328): HASH input, aligned to the key groups
        pytest.param(6, 0, 36, 0.8, 1, INT_MAX, True, 6, id="3.1-WithAdjustment"),
        pytest.param(16, 0, 128, 1.5, 1, INT_MAX, True, 32, id="3.2-WithAdjustment"),
        pytest.param(200, 0, 720, 1.3, 1, INT_MAX, True, 360, id="3.3-WithAdjustment"),
        pytest.param(200, 0, 720, INT_MAX, 1, INT_MAX, True, 720, id="3.4-WithAdjustment"),
        pytest.param(10, 0, 128, 2.5, 1, INT_MAX, True, 32, id="3.5-WithAdjustment"),
        # JVST.testParallelismComputationWithLimit (:427)
        pytest.param(6, 0, 720, 0.8, 1, 700, True, 5, id="4.1-WithLimit"),
        pytest.param(8, 0, 720, 0.8, 8, 700, True, 8, id="4.2-WithLimit"),
        pytest.param(16, 0, 128, 1.5, 1, INT_MAX, True, 32, id="4.3-WithLimit"),
        pytest.param(16, 0, 128, 1.5, 60, INT_MAX, True, 64, id="4.4-WithLimit-lower-limit-then-aligned"),
        pytest.param(200, 0, 720, 2, 1, 300, True, 240, id="4.5-WithLimit-no-divisor-under-the-limit-falls-back-down"),
        pytest.param(200, 0, 720, INT_MAX, 1, 600, True, 360, id="4.6-WithLimit"),
        # JVST.testNumPartitionsAdjustment (:973): a source with partitions
        pytest.param(6, 15, 128, 0.4, 1, INT_MAX, True, 3, id="5.1-NumPartitionsAdjustment"),
        pytest.param(7, 15, 128, 1.2, 1, INT_MAX, True, 15, id="5.2-NumPartitionsAdjustment"),
        pytest.param(20, 35, 30, 0.9, 1, INT_MAX, True, 18, id="5.3-scale-down-without-a-divisor-falls-back-down"),
        pytest.param(22, 35, 30, 1.1, 20, INT_MAX, True, 22, id="5.4-NumPartitionsAdjustment"),
        pytest.param(80, 200, 128, 1.4, 1, INT_MAX, True, 100, id="5.5-NumPartitionsAdjustment"),
        pytest.param(24, 199, INT_MAX, 4, 1, INT_MAX, True, 199, id="5.6-NumPartitionsAdjustment"),
        # AlignmentModeTest.builtInModesSearchOneRegionAndDoNotRelaxBelowTarget (main, EVENLY_SPREAD)
        pytest.param(5, 12, 8, 7 / 5, 1, INT_MAX, True, 6, id="6.1-AlignmentModeTest-capped-by-max-parallelism"),
        # JVST.testAdjustByMaxParallelism / SET.testAdjustByMaxParallelism (:853): the sink's 720 key groups
        pytest.param(2, 0, 720, 3.5, 1, INT_MAX, True, 8, id="16.7-testAdjustByMaxParallelism-hash-sink"),
        pytest.param(2, 0, 720, 3.5, 1, INT_MAX, False, 7, id="16.7-testAdjustByMaxParallelism-rebalance"),
        # derived from the 1.15 source (the note's probes P3, P3b, P4): a scale-down with no
        # divisor between target and current, and an unchanged value, which returns unaligned
        pytest.param(5, 6, 6, 4 / 5, 1, INT_MAX, True, 3, id="P3-scale-down-falls-back-to-fewer-subtasks"),
        pytest.param(13, 64, 64, 9 / 13, 1, INT_MAX, True, 8, id="P3b-64-partitions-13-to-8"),
        pytest.param(2, 9, 9, 0.532, 1, INT_MAX, True, 2, id="P4-unchanged-is-not-aligned-up"),
    ],
)
def test_scale(current, partitions, max_par, factor, lower, upper, aligned, expected):
    assert scale(current, factor, partitions=partitions, max_parallelism=max_par, lower=lower, upper=upper, aligned=aligned) == expected


# --- vertex limits: JVST.testMinParallelismLimitIsUsed (:532), testMaxParallelismLimitIsUsed (:562) ---


@pytest.mark.parametrize(
    "current, target, tpr, util, vmin, vmax, new, job",
    [
        pytest.param(10, 100, 500, 0.7, 5, 200, 5, 5, id="7.1-min-parallelism-used"),
        # a vertex below its minimum stays (Flink: lower = min(current, vertex.min)); here the
        # executor bounds are the operator's hard limits: normalization moves it to 5 (adaptation)
        pytest.param(4, 100, 500, 0.7, 5, 200, 4, 5, id="7.2-below-the-minimum-adaptation-moves-to-it"),
        pytest.param(10, 500, 100, 1.0, 1, 10, 10, 10, id="8.1-max-parallelism-used"),
        # above the maximum: Flink keeps 12; the hard bound takes it to 10 (adaptation)
        pytest.param(12, 500, 100, 1.0, 1, 10, 12, 10, id="8.2-above-the-maximum-adaptation-moves-to-it"),
    ],
)
def test_jvst_vertex_limits(current, target, tpr, util, vmin, vmax, new, job):
    policy = flink(target_utilization=util)
    m = VertexMetrics(parallelism=current, tpr=tpr, target_rate=target, catch_up_rate=0.0)
    got, outside = policy.vertex_change(m, partitions=0, max_parallelism=720, lower=min(current, vmin), upper=max(current, vmax), aligned=False)
    assert got == new
    proposal = pool_proposal([VertexDecision("v", current, got, outside, 0.0, "")], current, 1, "", {})
    decision, _ = normalize(NormalizeInput(NOW, proposal, current, vmin, vmax, ScalingHistory(), _no_extra_safety(timedelta(0))))
    assert (decision.target if decision.target is not None else current) == job


def test_jvst_ineffective_scaling_detection_is_off_by_default():
    # 10.1 (:707): detection off, the default: 20 -> 40. (10.2, detection on, is not modelled.)
    m = VertexMetrics(parallelism=20, tpr=90, target_rate=180, catch_up_rate=0.0)
    assert flink(target_utilization=1.0).vertex_change(m, partitions=0, max_parallelism=720, lower=1, upper=INT_MAX, aligned=False) == (40, True)


# --- SMET.testUtilizationBoundaryComputation (:264) and ...WithRestartTimesTracking (:287) ------


@pytest.mark.parametrize(
    "target, catch_up_rate, catch_up, restart, backlog, expected",
    [
        pytest.param(700, 0, 0, 1, False, (778, 1000), id="11.1"),
        pytest.param(700, 350, 2, 1, False, (1128, 1700), id="11.2"),
        pytest.param(700, 0, 2, 1, False, (778, 1350), id="11.3"),
        pytest.param(700, 350, 2, 1, True, (1050, math.inf), id="11.4-processing-backlog"),
        pytest.param(700, 0, 2, 1, True, (700, math.inf), id="11.5-processing-backlog-no-lag"),
        pytest.param(700, 350, 60, 300, False, (1128, 4850), id="12.1-WithRestartTimesTracking"),
        pytest.param(700, 0, 60, 300, False, (778, 4500), id="12.2-WithRestartTimesTracking"),
    ],
)
def test_smet_utilization_boundaries(target, catch_up_rate, catch_up, restart, backlog, expected):
    m = VertexMetrics(parallelism=1, tpr=1.0, target_rate=target, catch_up_rate=catch_up_rate, backlog=backlog)
    assert rate_thresholds(m, target=0.8, boundary=0.1, restart_seconds=restart, catch_up_seconds=catch_up) == expected


# --- SMET.testBacklogProcessingEvaluation (:321) ---------------------------------------------------


@pytest.mark.parametrize(
    "lag, processed, expected",
    [
        pytest.param(75_000, 200, True, id="14.1"),
        pytest.param(54_000, 200, False, id="14.2"),
        pytest.param(0, 200, False, id="14.3"),
        # derived (14.4): the lag grows 100 rows/s, so the target rate is 300/s; Flink divides by
        # the processed rate (numRecordsIn, 200/s): 375 s > 300 s. (The port divided by the
        # target rate: 250 s, no backlog mode.)
        pytest.param(75_000, 200, True, id="14.4-by-the-processed-rate-not-the-target-rate"),
    ],
)
def test_smet_backlog_processing(lag, processed, expected):
    assert processing_backlog(lag, processed, 300) is expected


def test_set_no_scale_down_on_zero_lower_utilization_boundary():
    # 15.1 (SET :223, SMET.testZeroValuesForRatesOrBusyness): nothing processed, TPR +inf;
    # utilization.min 0 makes the scale-down threshold infinite: no scaling
    policy = flink(target_utilization=0.6, utilization_boundary=0.6)
    m = VertexMetrics(parallelism=100, tpr=math.inf, target_rate=1000, catch_up_rate=0.0)
    new, outside = policy.vertex_change(m, partitions=0, max_parallelism=720, lower=1, upper=INT_MAX, aligned=False)
    assert not outside
    assert pool_proposal([VertexDecision("v", 100, new, outside, 0.0, "")], 100, 1, "", {}).executors == 100


# --- SET.testUtilizationBoundaries (:122) and ...MinMaxCompatibility (:267): a two-vertex job -----


@pytest.mark.parametrize(
    "boundary, source_catch_up, sink_target, slots",
    [
        pytest.param(0.0, 0, 60, 12, id="16.1-source-outside-slots-12"),
        pytest.param(0.2, 0, 60, 10, id="16.2-both-inside-no-rescale"),
        pytest.param(0.2, 0, 85, 15, id="16.3-sink-outside-both-applied-slots-15"),
        pytest.param(0.2, 0, 70, 10, id="16.4-both-inside-no-rescale"),
        pytest.param(0.2, 15, 70, 14, id="16.5-source-catch-up-slots-14"),
        pytest.param(0.1, 0, 85, 15, id="16.6-MinMaxCompatibility"),
    ],
)
def test_set_utilization_boundaries_one_slot_sharing_group(boundary, source_catch_up, sink_target, slots):
    # util 0.6; source (current 10, target 70, TPR 100), sink (current 10, TPR 100, HASH). Flink
    # applies every changed vertex once one is outside the band; one slot-sharing group needs as
    # many slots as its largest vertex: here the executor pool (a sum would ask ~N x for N queries)
    policy = flink(target_utilization=0.6, utilization_boundary=boundary)
    decisions = []
    for name, target, catch_up in (("source", 70, source_catch_up), ("sink", sink_target, 0)):
        m = VertexMetrics(parallelism=10, tpr=100, target_rate=target, catch_up_rate=catch_up)
        new, outside = policy.vertex_change(m, partitions=0, max_parallelism=720, lower=1, upper=INT_MAX, aligned=False)
        decisions.append(VertexDecision(name, 10, new, outside, 0.0, ""))
    assert pool_proposal(decisions, 10, 1, "", {}).executors == slots


# --- the lazy scale-down: JVST.testDisableScaleDownInterval (:592) ... (:1373), applied by the
# normalization's delayed scale-down as the port's settings_profile configures it --------------


def _no_extra_safety(delay: timedelta) -> NormalizeSettings:
    return NormalizeSettings(
        stabilization=timedelta(0),
        scale_up_stabilization=timedelta(0),
        scale_down_delay=delay,
        dead_band=0.0,
        max_scale_up_factor=1000.0,
        max_scale_down_factor=1.0,
        backlog_lag_threshold=timedelta(days=3650),
    )


def lazy_scale_down(ticks: list[tuple[float, float]], interval: timedelta, current: int = 100, tpr: float = 1000) -> list[int]:
    """util 1.0; each tick (seconds, target rate): the executor target."""
    policy = flink(target_utilization=1.0)
    history = ScalingHistory()
    out = []
    for t, rate in ticks:
        m = VertexMetrics(parallelism=current, tpr=tpr, target_rate=rate, catch_up_rate=0.0)
        new, outside = policy.vertex_change(m, partitions=0, max_parallelism=720, lower=1, upper=INT_MAX, aligned=False)
        proposal = pool_proposal([VertexDecision("v", current, new, outside, 0.0, "")], current, 1, "", {})
        decision, history = normalize(NormalizeInput(NOW + timedelta(seconds=t), proposal, current, 1, 1000, history, _no_extra_safety(interval)))
        out.append(decision.target if decision.target is not None else current)
    return out


@pytest.mark.parametrize(
    "ticks, interval, targets",
    [
        pytest.param([(0, 50)], timedelta(0), [5], id="9.1-testDisableScaleDownInterval-current-10-tpr-100"),
        # 640 at 59 s is outside (64 < 70); at 60 s the window's maximum, 90, is inside: no rescale
        pytest.param([(0, 800), (10, 900), (40, 720), (59, 640), (60, 700)], timedelta(seconds=60), [100] * 5, id="9.2-testScaleDownAfterInterval"),
        pytest.param([(0, 800), (10, 900), (12, 1700)], timedelta(seconds=60), [100, 100, 170], id="9.3-testImmediateScaleUpWithinScaleDownInterval"),
        pytest.param([(0, 800), (10, 900), (12, 1000)], timedelta(seconds=60), [100, 100, 100], id="9.4-testCancelDelayedScaleDownAfterNewParallelismIsSame"),
        pytest.param([(0, 500), (30, 600), (65, 600)], timedelta(seconds=60), [100, 100, 60], id="9.5-testMaxRecommendedParallelismUsedAfterScaleDownInterval"),
    ],
)
def test_jvst_lazy_scale_down(ticks, interval, targets):
    kw = {"current": 10, "tpr": 100} if interval == timedelta(0) else {}
    assert lazy_scale_down(ticks, interval, **kw) == targets


def test_lazy_scale_down_over_an_hour_rescales_when_flink_does():
    # derived (P5): 30 min at target 800 (80, inside), then 600 (60, outside), 1 h interval:
    # Flink's DelayedScaleDown rescales at minute 90 to 60
    ticks = [(60.0 * minute, 800 if minute < 30 else 600) for minute in range(0, 121)]
    targets = lazy_scale_down(ticks, timedelta(hours=1))
    assert targets.index(60) == 90


# --- SMET.testLagBasedSourceScaling (:56): the evaluator on micro-batches ------------------------


def batches(count: int, rows: int, busy: float, backlog_growth: int, trigger: float = 60.0) -> tuple[BatchSample, ...]:
    """``count`` batches, one per ``trigger`` s, the last ending 1 s before NOW."""
    out = []
    for k in range(count):
        end = NOW - timedelta(seconds=1 + trigger * (count - 1 - k))
        out.append(
            BatchSample(k, end - timedelta(seconds=busy), timedelta(seconds=busy), rows, rows / trigger, rows / busy, backlog_growth * (k + 1), cores=10, parallelism=10)
        )
    return tuple(out)


def policy_input(samples, load: QueryLoad, cores: int = 10, **view_kw) -> PolicyInput:
    view = query_view(parallelism=view_kw.pop("parallelism", 10), samples=samples, trigger=timedelta(seconds=60), run_started_at=NOW - timedelta(hours=2), **view_kw)
    ex = ExecutorView(tuple(Executor(str(i), 1) for i in range(cores)), 1, True, Reason.CAN_REQUEST_EXECUTORS)
    return PolicyInput(NOW, Snapshot(NOW, ex, (view,)), {"q": load}, ScalingHistory(), 1, 64, 1, timedelta(seconds=60), timedelta(seconds=60))


@pytest.mark.parametrize(
    "catch_up, catch_up_rate",
    [pytest.param("2s", 500, id="13.1"), pytest.param("1s", 1000, id="13.2"), pytest.param("0s", 0, id="13.3")],
)
def test_smet_lag_based_source_scaling(catch_up, catch_up_rate):
    # input 100 rows/s, the lag grows 50 rows/s to 1000, busy 0.7: TARGET_DATA_RATE 150,
    # CATCH_UP_DATA_RATE = lag / catch-up, TPR = 100 / 0.7
    samples = batches(15, rows=6000, busy=42.0, backlog_growth=3000)
    load = QueryLoad(name="q", samples=15, input_rate=150.0, backlog_rows=1000.0)
    found = flink(catch_up_duration=catch_up).metrics(query_view(samples=samples, run_started_at=NOW - timedelta(hours=2)), load, policy_input(samples, load))
    m, _ = found
    assert m.target_rate == pytest.approx(150) and m.catch_up_rate == pytest.approx(catch_up_rate) and m.tpr == pytest.approx(100 / 0.7)


# --- going blind during a long batch (the note's probes P1, P1c) ----------------------------------


def test_a_long_batch_does_not_blind_the_port():
    # the last batch ended 20 min ago and the next has run since; the lag is 20 min at 5000
    # rows/s. Flink would see busy time 1000 ms/s and pendingRecords growing every reconcile; the
    # port reads the TPR of the latest completed batches and the live target and lag
    samples = tuple(
        BatchSample(k, NOW - timedelta(minutes=40 - k), timedelta(seconds=30), 60_000, 1000.0, 2000.0, 0, cores=8, parallelism=64)
        for k in range(20)
    )
    load = QueryLoad(name="q", samples=2, input_rate=5000.0, backlog_rows=None, lag=timedelta(minutes=20))
    inp = policy_input(samples, load, cores=8, batch_running=True, parallelism=64)
    proposal = flink().propose(inp)
    assert proposal.reason == Reason.SCALE_UP_FOR_LOAD and proposal.executors > 8
