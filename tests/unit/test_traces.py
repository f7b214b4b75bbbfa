import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.tools.traces import (
    RateProfile,
    TraceError,
    TraceGapWarning,
    TraceOrderWarning,
    compress_trace,
    load_trace,
    scale_to_peak,
)


def write(tmp_path, text):
    p = tmp_path / "t.csv"
    p.write_text(text)
    return p


def test_loads_nab_format(tmp_path):
    t = load_trace(write(tmp_path, "timestamp,value\n2014-07-01 00:00:00,10\n2014-07-01 00:30:00,20\n2014-07-01 01:00:00,5\n"))
    assert t.values == (10.0, 20.0, 5.0) and t.step_seconds == 1800


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("", "is empty", id="empty"),
        pytest.param("timestamp,value\n", "has no data rows", id="no-rows"),
        pytest.param("time,count\n2014-07-01 00:00:00,1\n", "header 'timestamp,value'", id="bad-header"),
        pytest.param("timestamp,value\n2014-07-01 00:00:00,abc\n", "line 2: 'abc' is not a number", id="non-numeric"),
        pytest.param("timestamp,value\nyesterday,1\n", "line 2: 'yesterday' is not a timestamp", id="bad-timestamp"),
        pytest.param("timestamp,value\n2014-07-01 00:00:00,-3\n", "must be a finite number >= 0", id="negative"),
        pytest.param("timestamp,value\n2014-07-01 00:00:00\n", "line 2 has 1 column", id="one-column"),
        # a thousands separator splits the value: read as 10, it was 10844
        pytest.param("timestamp,value\n2014-07-01 00:00:00,5\n2014-07-01 00:05:00,10,844\n",
                     r"line 3 has 3 column\(s\), expected 2 \(timestamp,value\).*a thousands separator", id="three-columns"),
        pytest.param("timestamp,value,extra\n2014-07-01 00:00:00,1,2\n", "line 1 must be the header 'timestamp,value'", id="three-column-header"),
        pytest.param("timestamp,value\n2014-07-01 00:00:00,0\n", "every value is zero", id="all-zero"),
        # one stray quote swallows the rest of a real export into a field, past the csv module's limit
        pytest.param("timestamp,value\n2014-07-01 00:00:00,1\n\"2014-07-01 00:05:00,1\n" + "2014-07-01 00:10:00,1\n" * 8000,
                     r"line 3: field larger than field limit \(131072\) \(a quote never closed\?\)", id="stray-quote"),
    ],
)
def test_bad_traces_name_file_line_and_problem(tmp_path, text, message):
    with pytest.raises(TraceError, match=message):
        load_trace(write(tmp_path, text))


def stamps(trace):
    return [ts.strftime("%H:%M") for ts in trace.timestamps]


@pytest.mark.parametrize(
    "rows, expected, merged, line",
    [
        # a local-time export across the spring-forward change: the missing hour's rows all say
        # 03:00 (here 20-minute steps: 01:40, then three rows at 03:00, then 03:20)
        pytest.param(
            ["01:00,1", "01:20,2", "01:40,3", "03:00,4", "03:00,5", "03:00,9", "03:20,7"],
            [("01:00", 1), ("01:20", 2), ("01:40", 3), ("03:00", 6), ("03:20", 7)],
            2,
            6,
            id="dst-spring-forward-clamped",
        ),
        # autumn: 01:00 and 01:20 come twice; they join the step before them, the rest keeps its time
        pytest.param(
            ["00:40,1", "01:00,2", "01:20,3", "01:00,4", "01:20,5", "01:40,6"],
            [("00:40", 1), ("01:00", 2), ("01:20", 4), ("01:40", 6)],
            2,
            5,
            id="dst-fall-back-repeated-hour",
        ),
        pytest.param(["00:00,1", "00:30,2", "00:10,4", "01:00,4"], [("00:00", 1), ("00:30", 3), ("01:00", 4)], 1, 4, id="out-of-order"),
        pytest.param(["00:00,1", "00:00,1", "00:30,2", "00:30,2"], [("00:00", 1), ("00:30", 2)], 2, 3, id="exported-twice"),
    ],
)
def test_timestamps_that_do_not_increase_merge_by_order_with_one_warning(tmp_path, rows, expected, merged, line):
    text = "timestamp,value\n" + "".join(f"2014-03-09 {r}\n" for r in rows)
    with pytest.warns(TraceOrderWarning) as caught:
        trace = load_trace(write(tmp_path, text))
    assert len(caught) == 1
    assert f"{merged} row(s) with a timestamp not after the previous row's, the first on line {line}" in str(caught[0].message)
    assert list(zip(stamps(trace), trace.values)) == [(t, float(v)) for t, v in expected]


def test_a_trace_sorted_newest_first_is_read_in_reverse_with_one_warning(tmp_path):
    # merge by order alone folded it into one step, and the simulation ran on it (exit 0)
    rows = ["01:00,4", "00:30,3", "00:30,5", "00:00,1"]  # newest first, one step exported twice
    text = "timestamp,value\n" + "".join(f"2014-03-09 {r}\n" for r in rows)
    with pytest.warns(TraceOrderWarning) as caught:
        trace = load_trace(write(tmp_path, text))
    messages = [str(w.message) for w in caught]
    assert messages[0].endswith("2 of its 4 rows have a timestamp earlier than the row before them (sorted newest first); read in reverse, oldest first")
    assert "1 row(s) with a timestamp not after the previous row's" in messages[1] and len(messages) == 2
    assert list(zip(stamps(trace), trace.values)) == [("00:00", 1.0), ("00:30", 4.0), ("01:00", 4.0)]


def test_both_ec2_traces_with_a_daylight_saving_change_load():
    import warnings
    from pathlib import Path

    for name in ("ec2_network_in_5abac7", "ec2_disk_write_bytes_1ef3de"):
        path = Path(__file__).parents[3] / "shared" / "traces" / f"{name}.csv"
        if not path.is_file():
            pytest.skip("the shared traces are not on this machine")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trace = load_trace(path)
        assert len(caught) == 1 and "11 row(s)" in str(caught[0].message)
        assert len(trace.values) == 4730 - 11
        assert all(b > a for a, b in zip(trace.timestamps, trace.timestamps[1:]))
        assert trace.step_seconds == 300


def rows_at(*stamps):
    return "timestamp,value\n" + "".join(f"{ts},1\n" for ts in stamps)


@pytest.mark.parametrize(
    "stamps, read_as, message",
    [
        # 5-minute steps: 100 steps are 8.3 hours, so the day is the bound; 1 day 5 min is over it.
        # An outage of the collector: a day of no rows, not a day of the value before it
        pytest.param(
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2015-01-01 00:10:00", "2015-01-02 00:15:00", "2015-01-02 00:20:00"],
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2015-01-01 00:10:00", "2015-01-01 00:15:00", "2015-01-01 00:20:00"],
            "1 gap(s) with no rows over 100 steps of 300 s and over a day skipped (an outage of the export?), "
            "the first between lines 4 and 5, the longest 1.003 days",
            id="a-day-and-a-step-in-five-minute-steps",
        ),
        # three rows, then one a year on: the step is the median of the gaps but the longest,
        # the middle of (5 min, 1 day 5 min), 86700 s; the year is 364 of those and over a day
        pytest.param(
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2015-01-02 00:10:00", "2016-01-02 00:10:00"],
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2015-01-02 00:10:00", "2015-01-03 00:15:00"],
            "1 gap(s) with no rows over 100 steps of 86700 s and over a day skipped (an outage of the export?), "
            "the first between lines 4 and 5, the longest 365 days",
            id="a-year-after-the-rest",
        ),
        # a short trace's last row a year on: its median gap was the year itself until the step
        # left the longest gap out, and the year was simulated tick by tick
        pytest.param(
            ["2014-07-01 00:00:00", "2014-07-01 00:30:00", "2015-07-01 00:30:00"],
            ["2014-07-01 00:00:00", "2014-07-01 00:30:00", "2014-07-01 01:00:00"],
            "the first between lines 3 and 4, the longest 365 days",
            id="a-short-trace-with-a-year-at-its-end",
        ),
        # two outages in 30-minute steps (as NYC taxi's): each closed to one step, the hours after
        # each kept in their order and spacing
        pytest.param(
            ["2015-01-01 00:00:00", "2015-01-01 00:30:00", "2015-01-04 00:00:00", "2015-01-04 00:30:00", "2015-01-04 01:00:00",
             "2015-01-09 01:00:00", "2015-01-09 01:30:00"],
            ["2015-01-01 00:00:00", "2015-01-01 00:30:00", "2015-01-01 01:00:00", "2015-01-01 01:30:00", "2015-01-01 02:00:00",
             "2015-01-01 02:30:00", "2015-01-01 03:00:00"],
            "2 gap(s) with no rows over 100 steps of 1800 s and over a day skipped (an outage of the export?), "
            "the first between lines 3 and 4, the longest 5 days",
            id="two-outages",
        ),
    ],
)
def test_a_gap_over_100_steps_and_a_day_is_skipped_and_said_once(tmp_path, stamps, read_as, message):
    with pytest.warns(TraceGapWarning) as caught:
        trace = load_trace(write(tmp_path, rows_at(*stamps)))
    assert [str(ts) for ts in trace.timestamps] == read_as
    assert len(caught) == 1 and message in str(caught[0].message), [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "stamps, message",
    [
        # a year typed wrong mid-trace: merge by order would fold every row after it into that one
        # step (the rest of the trace read as one 5-minute step)
        pytest.param(
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2016-01-01 00:10:00", "2015-01-01 00:15:00", "2015-01-01 00:20:00"],
            "line 4: timestamp 2016-01-01 00:10:00 is 365 days after 2015-01-01 00:05:00 on line 3, "
            "and line 5 goes back to 2015-01-01 00:15:00: a date typed wrong?",
            id="one-row-a-year-on",
        ),
        pytest.param(
            ["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2016-01-01 00:10:00", "2016-01-01 00:15:00", "2015-01-01 00:15:00"],
            "line 4: timestamp 2016-01-01 00:10:00 is 365 days after 2015-01-01 00:05:00 on line 3, "
            "and line 6 goes back to 2015-01-01 00:15:00",
            id="two-rows-a-year-on",
        ),
    ],
)
def test_a_far_gap_the_rows_after_it_go_back_across_is_refused_as_a_date_typed_wrong(tmp_path, stamps, message):
    with pytest.raises(TraceError, match=re.escape(message)):
        load_trace(write(tmp_path, rows_at(*stamps)))


@pytest.mark.parametrize(
    "stamps",
    [
        # 23 hours in a 5-minute trace: 276 steps, but under a day
        pytest.param(["2015-01-01 00:00:00", "2015-01-01 00:05:00", "2015-01-01 00:10:00", "2015-01-01 23:10:00"], id="under-a-day"),
        # daily steps: 99 days is under 100 steps, though far over a day
        pytest.param(["2015-01-01", "2015-01-02", "2015-01-03", "2015-04-12"], id="under-100-steps"),
        # a second in a trace of millisecond steps: 1000 steps, but nothing near a day
        pytest.param(["2015-01-01 00:00:00.000", "2015-01-01 00:00:00.001", "2015-01-01 00:00:00.002", "2015-01-01 00:00:01.002"], id="sub-second"),
    ],
)
def test_a_gap_under_either_bound_is_read_as_it_is(tmp_path, stamps):
    assert len(load_trace(write(tmp_path, rows_at(*stamps))).values) == 4


def test_a_trace_longer_than_ten_years_is_refused_naming_its_first_and_last_row(tmp_path):
    # two rows, the second a century on: one gap, nothing to measure it against, so the gap rule passes it
    text = rows_at("2015-01-01 00:00:00", "2115-01-01 00:00:00")
    with pytest.raises(TraceError, match=re.escape("spans 36524 days, from 2015-01-01 00:00:00 on line 2 to 2115-01-01 00:00:00 on line 3, more than 3650")):
        load_trace(write(tmp_path, text))
    assert len(load_trace(write(tmp_path, rows_at("2015-01-01", "2016-01-01", "2024-12-29"))).values) == 3  # within 3650 days


def test_every_shared_trace_loads_with_its_gaps_far_under_the_bound():
    """The shared traces' largest gaps (module docstring): EC2 network 12.8 steps, EC2 disk 12.2, ELB 2.0."""
    import warnings
    from pathlib import Path

    from autoscaler.tools.traces import GAP_STEPS

    shared = Path(__file__).parents[3] / "shared" / "traces"
    paths = sorted(shared.glob("*.csv"))
    if not paths:
        pytest.skip("the shared traces are not on this machine")
    for path in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceOrderWarning)
            trace = load_trace(path)
        largest = max((b - a).total_seconds() for a, b in zip(trace.timestamps, trace.timestamps[1:]))
        assert largest / trace.step_seconds < GAP_STEPS / 5, path.name


def test_missing_trace(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        load_trace(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\xa6", "is not UTF-8 text (invalid start byte)", id="binary"),
        pytest.param(
            b"timestamp,value\n2014-07-01 00:00:00,1\n2014-07-01T00:30:00+00:00,1\n",
            "line 3: timestamps mix a time zone and none ('2014-07-01T00:30:00+00:00')",
            id="naive-then-aware",
        ),
    ],
)
def test_unreadable_traces_name_the_problem(tmp_path, content, message):
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=re.escape(message)):
        load_trace(path)


def test_a_directory_is_not_a_trace(tmp_path):
    with pytest.raises(TraceError, match="is not a file"):
        load_trace(tmp_path)


def test_a_byte_order_mark_and_crlf_line_ends_are_read(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufefftimestamp,value\r\n2014-07-01 00:00:00,10\r\n2014-07-01 00:30:00,20\r\n".encode())
    assert load_trace(path).values == (10.0, 20.0)


def test_profile_cumulative_and_generation_time():
    p = RateProfile.steps([(10, 100), (10, 300)])
    assert p.cumulative(10) == 1000 and p.cumulative(20) == 4000 and p.cumulative(99) == 4000
    assert p.time_of(0) == pytest.approx(0.01)
    assert p.time_of(999) == pytest.approx(10.0)
    assert p.time_of(1299) == pytest.approx(11.0)
    assert RateProfile.decode(p.encode()) == p


@given(st.lists(st.tuples(st.floats(1e-3, 1e5), st.floats(0, 1e7)), min_size=1, max_size=8))
def test_a_profile_crosses_to_the_spark_source_unchanged(phases):
    """The demo's source generates rows from the decoded profile, the exactly-once check counts
    them with the original: every digit must cross (six significant ones turned 123456.7 rows/s
    into 123457)."""
    p = RateProfile.steps(phases)
    decoded = RateProfile.decode(p.encode())
    assert decoded == p
    assert decoded.cumulative(10**9) == p.cumulative(10**9)


@given(st.lists(st.tuples(st.floats(0.5, 50), st.floats(0, 5000)), min_size=1, max_size=8), st.integers(0, 10**6))
def test_row_is_generated_before_the_cumulative_count_reaches_it(phases, row):
    p = RateProfile.steps(phases)
    total = p.cumulative(10**9)
    if row >= total:
        return
    t = p.time_of(row)
    assert p.cumulative(t + 1e-6) >= row + 1  # the row exists right after its generation time
    assert p.cumulative(t - 1e-3) <= row  # and not before


def test_compressing_a_day_of_taxi_demand(tmp_path):
    rows = ["timestamp,value"] + [f"2014-07-01 {h:02d}:{m:02d}:00,{100 + h * 10}" for h in range(24) for m in (0, 30)]
    trace = load_trace(write(tmp_path, "\n".join(rows) + "\n"))
    p = compress_trace(trace, seconds_per_day=48, peak_rate=2000, duration=48, start_hour=3)
    assert p.rate_at(0) == pytest.approx(2000 * 130 / 330)  # 3 a.m. value scaled by the window's peak (23 h -> 330)
    assert max(p.rates) == pytest.approx(2000)
    assert p.rate_at(48.5) == 0


def steps_of(tmp_path, seconds, count):
    from datetime import datetime, timedelta

    t0 = datetime(2015, 1, 1)
    return load_trace(write(tmp_path, rows_at(*(t0 + timedelta(seconds=k * seconds) for k in range(count)))))


@pytest.mark.parametrize(
    "step, seconds_per_day, duration, message",
    [
        # real time (a day a day), a 1-second step: 10,001 s are 10,001 phases, one over
        pytest.param(1, 86400, 10_001, "its step of 1 s lasts 1 s at 86400 seconds per day, so 10001 s of replay would be 1e+04 steps, "
                     "over the 10,000 a replay may have; give a day at least 8.64e+04 seconds", id="one-over"),
        # a 5-minute trace (AAPL) at 1 s a day: a step lasts 3.47 ms, 180 s are 51,840 of them
        pytest.param(300, 1, 180, "its step of 300 s lasts 0.00347 s at 1 seconds per day, so 180 s of replay would be 5.18e+04 steps, "
                     "over the 10,000 a replay may have; give a day at least 5.18 seconds", id="tiny-seconds-per-day"),
        # microsecond timestamps at the demo's 150 s a day: a step lasts 1.7 ns (the probe asked for 5.8e8 in 1 s)
        pytest.param(1e-6, 150, 0.0002, "its step of 1e-06 s lasts 1.74e-09 s at 150 seconds per day, so 0.0002 s of replay would be "
                     "1.15e+05 steps", id="microsecond-steps"),
        # a duration at the edge of a float: "give a day at least inf seconds" was no advice
        pytest.param(1800, 150, 1e308, "its step of 1800 s lasts 3.12 s at 150 seconds per day, so 1e+308 s of replay would be 3.2e+307 steps, "
                     "over the 10,000 a replay may have; replay a shorter duration", id="astronomic-duration"),
    ],
)
def test_a_compression_into_more_phases_than_a_replay_may_have_is_refused_before_any_is_built(tmp_path, step, seconds_per_day, duration, message):
    trace = steps_of(tmp_path, step, 4)
    with pytest.raises(TraceError, match=re.escape(f"trace 't': {message}")):
        compress_trace(trace, seconds_per_day=seconds_per_day, peak_rate=100, duration=duration)


def test_a_compression_into_as_many_phases_as_a_replay_may_have_is_built(tmp_path):
    trace = steps_of(tmp_path, 1, 4)
    profile = compress_trace(trace, seconds_per_day=86400, peak_rate=100, duration=10_000)
    assert len(profile.rates) == 10_000 + 1  # and the 0 after the last


def test_a_seconds_per_day_so_small_a_step_underflows_to_zero_is_refused(tmp_path):
    # 1e-6 s x 1e-320 / 86400 is 0.0 in floats: was a ZeroDivisionError
    with pytest.raises(TraceError, match=re.escape("would be inf steps")):
        compress_trace(steps_of(tmp_path, 1e-6, 4), seconds_per_day=1e-320, peak_rate=100, duration=1)


def test_prefixed_profile_delays_the_trace_by_a_constant_phase():
    from autoscaler.tools.traces import prefixed

    p = prefixed(RateProfile.steps([(10, 300)]), 5, 100)
    assert p.rate_at(2) == 100 and p.rate_at(6) == 300 and p.rate_at(16) == 0
    assert p.cumulative(15) == 500 + 3000


@pytest.mark.parametrize(
    "value, peak, peak_rate, expected",
    [(5.0, 10.0, 28000.0, 14000.0), (1e308, 1e308, 28000.0, 28000.0), (5e307, 1e308, 28000.0, 14000.0)],
)
def test_values_scale_to_the_peak_rate_even_near_the_float_maximum(value, peak, peak_rate, expected):
    assert scale_to_peak(value, peak, peak_rate) == pytest.approx(expected)
