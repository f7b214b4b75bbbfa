from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.costmodel import REFIT_EVERY, CostModelCache, fit_cost_model
from autoscaler.core.model import BatchCostModel, BatchSample

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TRUE = BatchCostModel(per_slot=900, per_task=0.05, fixed=0.2)


def batch(i, rows, cores=4, parallelism=8, seconds=None, cold=False, fixed=0.2):
    seconds = TRUE.duration(parallelism, cores, rows) if seconds is None else seconds
    return BatchSample(
        batch_id=i,
        started_at=T0 + timedelta(seconds=2 * i),
        duration=timedelta(seconds=seconds),
        input_rows=rows,
        input_rate=None,
        processing_rate=None,
        backlog_rows=None,
        cores=cores,
        parallelism=parallelism,
        fixed_overhead=None if fixed is None else timedelta(seconds=fixed),
        cold=cold,
    )


@pytest.mark.parametrize(
    "partitions, cores, rows, seconds",
    [
        # o + ceil(P/C) x (w + R / (P x mu))
        pytest.param(8, 1, 800, 0.2 + 8 * (0.05 + 100 / 900), id="eight-waves-on-one-core"),
        pytest.param(8, 4, 800, 0.2 + 2 * (0.05 + 100 / 900), id="two-waves-on-four"),
        pytest.param(8, 6, 5000, 0.2 + 2 * (0.05 + 625 / 900), id="six-cores-no-faster-than-four"),
        pytest.param(8, 8, 5000, 0.2 + 1 * (0.05 + 625 / 900), id="one-wave"),
    ],
)
def test_duration_follows_task_waves(partitions, cores, rows, seconds):
    assert TRUE.duration(partitions, cores, rows) == pytest.approx(seconds)


def test_rows_in_inverts_duration():
    d = TRUE.duration(8, 3, 4000)
    assert TRUE.rows_in(8, 3, d) == pytest.approx(4000)


def test_fit_recovers_per_row_per_task_and_fixed_costs_across_scales():
    samples = [batch(i, rows, cores) for i, (rows, cores) in enumerate([(800, 1), (1600, 2), (4000, 4), (5000, 4), (2400, 3), (1200, 1), (3000, 6)])]
    fit = fit_cost_model(samples)
    assert fit.per_slot == pytest.approx(900, rel=1e-6)
    assert fit.per_task == pytest.approx(0.05, abs=1e-6)
    assert fit.fixed == pytest.approx(0.2)


def test_fit_without_spread_still_predicts_the_current_load_at_other_core_counts():
    # all batches 800 rows on 4 cores: w and mu cannot be told apart, but the time per task is known
    fit = fit_cost_model([batch(i, 800) for i in range(6)])
    assert fit.per_task == 0.0
    assert fit.duration(8, 1, 800) == pytest.approx(TRUE.duration(8, 1, 800))


def test_fit_ignores_cold_batches_and_shrugs_off_outliers():
    rows = [800, 1600, 3200, 2400, 4000, 1200, 2800, 3600]
    samples = [batch(i, r) for i, r in enumerate(rows)]
    samples[2] = batch(2, 3200, seconds=5 * TRUE.duration(8, 4, 3200))  # an executor starting up
    samples[5] = batch(5, 1200, seconds=4 * TRUE.duration(8, 4, 1200))  # a GC pause
    samples.append(batch(9, 100, seconds=30.0, cold=True))
    fit = fit_cost_model(samples)
    assert fit.per_slot == pytest.approx(900, rel=0.05)
    assert fit.per_task == pytest.approx(0.05, abs=0.02)


def test_cold_batches_serve_only_while_there_are_no_warm_ones():
    # the first batches of a slow start are all a query has: size it from them (conservatively)
    cold = fit_cost_model([batch(0, 800, seconds=4.0, cold=True)])
    assert cold is not None and cold.duration(8, 4, 800) == pytest.approx(4.0)
    warm = fit_cost_model([batch(0, 800, seconds=4.0, cold=True), batch(1, 800)])
    assert warm.duration(8, 4, 800) == pytest.approx(TRUE.duration(8, 4, 800))
    assert fit_cost_model([batch(0, 0)]) is None and fit_cost_model([]) is None


def test_fit_learns_per_task_cost_growing_with_concurrent_tasks():
    # executors sharing 2 CPUs: a task costs 0.05 s alone plus 0.1 s per concurrent task
    shared = BatchCostModel(per_slot=900, per_task=0.05, fixed=0.2, contention=0.1)
    loads = [(800, 1), (1600, 1), (800, 4), (5000, 4), (3200, 2), (2400, 4), (1200, 2), (4000, 4)]
    samples = [batch(i, rows, cores, seconds=shared.duration(8, cores, rows)) for i, (rows, cores) in enumerate(loads)]
    fit = fit_cost_model(samples)
    assert fit.contention == pytest.approx(0.1, abs=1e-6)
    assert fit.per_task == pytest.approx(0.05, abs=1e-6)
    # so a scale-down from 4 to 1 core is predicted right: 8 waves of (0.15 + 100/900) s, not of (0.45 + ...)
    assert fit.duration(8, 1, 800) == pytest.approx(0.2 + 8 * (0.15 + 100 / 900))


def _window(n, rows=lambda i: 400 + 300 * (i % 5), **kw):
    return [batch(i, rows(i), **kw) for i in range(n)]


def test_cache_reuses_the_fit_while_new_batches_follow_it():
    cache = CostModelCache()
    samples = _window(40)
    first = cache.fit(samples)
    samples += [batch(40 + i, 400 + 300 * (i % 5)) for i in range(REFIT_EVERY - 1)]
    assert cache.fit(samples) is first  # the new batches are predicted well: no refit
    samples.append(batch(40 + REFIT_EVERY, 700))
    assert cache.fit(samples) is not first  # REFIT_EVERY new batches: fitted again
    assert cache.fit(samples) == fit_cost_model(samples)


def test_cache_refits_at_once_when_a_batch_is_mispredicted_or_the_regime_changes():
    cache = CostModelCache()
    samples = _window(40)
    first = cache.fit(samples)
    slow = samples + [batch(40, 700, seconds=2 * TRUE.duration(8, 4, 700))]
    assert cache.fit(slow) is not first and cache.fit(slow) == fit_cost_model(slow)
    cache = CostModelCache()
    first = cache.fit(samples)
    rescaled = samples + [batch(40, 700, cores=6)]
    assert cache.fit(rescaled) is not first and cache.fit(rescaled) == fit_cost_model(rescaled)


def test_caches_of_two_queries_do_not_share_state():
    a, b = CostModelCache(), CostModelCache()
    fast, slow = _window(30), _window(30, cores=2)
    fit_a, fit_b = a.fit(fast), b.fit(slow)
    assert a.fit(fast) is fit_a and b.fit(slow) is fit_b
    assert fit_a == fit_cost_model(fast) and fit_b == fit_cost_model(slow)


def test_an_exact_plain_fit_is_not_replaced_by_a_degenerate_contention_fit():
    """The batches of a noise-free simulation just after a step up (12 partitions on 4 cores, the
    backlog drained on 9 with 18): a contention term fits most of them as exactly as the true model
    (900 rows/s per core, 0.07 s per task, 0.2 s fixed) does, and the residual scales (medians of
    residuals about 1e-16) were compared by rounding. The fit chosen was 4957 rows/s per core,
    1.06 s per task and 0.23 s of contention: it released 9 executors to 6, which cannot carry
    the load, and the policy scaled up again 20 s later."""
    runs = [
        (55, 25000, 4, 12, 7.354444, False),
        (1, 60000, 4, 12, 17.076667, False),
        (1, 102460, 4, 12, 28.871111, False),
        (1, 182227, 9, 18, 26.189383, True),
        (1, 157136, 9, 18, 19.739506, True),
        (1, 118437, 9, 18, 14.961852, False),
        (1, 89772, 9, 18, 11.422963, False),
        (1, 68537, 9, 18, 8.801358, False),
        (1, 52809, 9, 18, 6.85963, False),
        (1, 41157, 9, 18, 5.421111, False),
        (1, 32527, 9, 18, 4.355679, False),
        (1, 54938, 9, 18, 7.122469, False),
        (54, 60000, 9, 18, 7.747407, False),
    ]
    shapes = [(rows, cores, parallelism, seconds, cold) for n, rows, cores, parallelism, seconds, cold in runs for _ in range(n)]
    samples = [batch(i, rows, cores, parallelism, seconds=seconds, cold=cold) for i, (rows, cores, parallelism, seconds, cold) in enumerate(shapes)]
    fit = fit_cost_model(samples)
    assert fit.contention == 0.0
    assert fit.per_slot == pytest.approx(900, rel=1e-4) and fit.per_task == pytest.approx(0.07, abs=1e-4)
    true = BatchCostModel(per_slot=900, per_task=0.07, fixed=0.2)
    assert fit.duration(12, 6, 60000) == pytest.approx(true.duration(12, 6, 60000), rel=1e-4)
