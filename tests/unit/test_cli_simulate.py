"""``spark-autoscaler simulate``: the JSON contract, the comparison table, plots and bad input."""

import json
import pickle
from datetime import datetime, timedelta

import pytest
import structlog

from autoscaler.cli import main
from autoscaler.core.model import Proposal, Reason
from autoscaler.runtime.reconciler import TickError
from policies import Policy, PolicyInput, PolicyParams
from policies.registry import _REGISTRY

CONTRACT = {
    "policy",
    "trace",
    "executor_seconds",
    "oracle_executor_seconds",
    "cost_ratio",
    "slo_violation_fraction",
    "p95_lag_seconds",
    "max_lag_seconds",
    "rescales",
    "rescales_per_day",
    "simulated_seconds",
    "overshoot_fraction",
}


@pytest.fixture
def trace(tmp_path):
    """Two hours at a 5 minute step: quiet, a burst, quiet."""
    path = tmp_path / "small.csv"
    t0 = datetime(2024, 3, 1)
    values = [10, 12, 11, 10, 40, 42, 12, 10, 11, 10, 12, 11, 10, 11, 10, 12, 11, 10, 12, 11, 10, 11, 12, 10]
    rows = [f"{(t0 + timedelta(minutes=5 * i)).isoformat(sep=' ')},{v}" for i, v in enumerate(values)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def test_json_output_holds_the_contract_fields(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert CONTRACT <= set(out)
    assert out["policy"] == "default" and out["trace"] == "small"
    assert out["simulated_seconds"] == 2 * 3600
    assert out["cost_ratio"] == pytest.approx(out["executor_seconds"] / out["oracle_executor_seconds"], rel=1e-5)
    assert out["rescales_per_day"] == pytest.approx(out["rescales"] / (2 / 24))
    assert 0.0 <= out["slo_violation_fraction"] <= 1.0
    assert out["max_lag_seconds"] >= out["p95_lag_seconds"] > 0
    assert 0.0 <= out["overshoot_fraction"] <= 1.0


def test_a_daemon_setting_reaches_the_simulated_daemon(trace, capsys):
    # the burst's executors, released once idle, are held an hour by a 1 h scale-down delay
    runs = {}
    for extra in ([], ["--setting", "normalize.scale_down_delay=1h"]):
        assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8", *extra]) == 0
        runs[bool(extra)] = json.loads(capsys.readouterr().out)["executor_seconds"]
    assert runs[True] > 1.5 * runs[False], runs


def test_a_floor_above_the_daemons_default_maximum_holds_in_the_simulation(trace, capsys):
    # refused before as "min (12) must not exceed max (8)": the daemon's default, not the 16 here
    for floor in ("executors.min=12", "executors={min: 12}"):
        assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8", "--setting", floor]) == 0
        out = json.loads(capsys.readouterr().out)
        # at the floor from the first decision on (the simulation starts with what the first load needs)
        assert out["max_executors"] == 16 and out["executor_seconds"] >= 0.98 * 12 * out["simulated_seconds"], (floor, out)


def test_scale_quantile_sizes_the_trace_by_its_99th_percentile(trace, capsys):
    # values 10..42: the 0.5 quantile (11) needs 4 executors, so the burst (42) needs 16 of at most 8
    args = ["simulate", "--trace", str(trace), "--json", "--policy", "static", "--peak-executors", "4", "--scale-quantile", "0.5"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["scale_quantile"], out["max_executors"]) == (0.5, 8)
    # the oracle stays within the ceiling too: 8 executors during the burst's 10 minutes, not 16
    assert out["oracle_executor_seconds"] <= 8 * out["simulated_seconds"]
    assert out["slo_violation_fraction"] > 0  # the burst is beyond what 4 static executors hold


def test_scale_quantile_must_be_a_share(trace, capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--trace", str(trace), "--scale-quantile", "1.5"])
    assert "must be within (0, 1]" in capsys.readouterr().err


def test_options_reach_the_simulation(trace, capsys):
    args = ["simulate", "--trace", str(trace), "--json", "--policy", "static", "--peak-executors", "4"]
    args += ["--slo-lag-seconds", "30", "--days", "0.05", "--seed", "3"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["policy"], out["peak_executors"], out["slo_lag_seconds"], out["seed"]) == ("static", 4, 30, 3)
    assert out["simulated_seconds"] == pytest.approx(0.05 * 86400)


def test_compare_runs_every_policy_and_prints_a_table(trace, capsys, tmp_path):
    png = tmp_path / "compare.png"
    assert main(["simulate", "--trace", str(trace), "--compare", "--days", "0.04", "--plot", str(png)]) == 0
    table = capsys.readouterr().out
    for name in ("default", "flink-autoscaler", "spark-dra", "dstream-dra", "amadeus", "static", "reactive"):
        assert f"| {name} " in table
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_writes_a_png(trace, tmp_path, capsys):
    png = tmp_path / "run.png"
    assert main(["simulate", "--trace", str(trace), "--plot", str(png)]) == 0
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(None, "does not exist", id="missing-file"),
        pytest.param("", "is empty", id="empty-file"),
        pytest.param("timestamp,value\n", "has no data rows", id="no-rows"),
        pytest.param("timestamp,value\n2024-01-01 00:00:00,lots\n", "'lots' is not a number", id="non-numeric"),
        pytest.param("time,count\n2024-01-01 00:00:00,1\n", "header 'timestamp,value'", id="wrong-header"),
        pytest.param("timestamp,value\n2024-01-01 00:00:00,-3\n", "must be a finite number >= 0", id="negative-value"),
    ],
)
def test_bad_traces_end_with_a_message_and_a_non_zero_exit(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    if content is not None:
        path.write_text(content)
    assert main(["simulate", "--trace", str(path)]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["--policy", "nope"], "unknown policy 'nope'", id="unknown-policy"),
        pytest.param(["--param", "target_utilization=3"], "params.target_utilization", id="bad-policy-parameter"),
        pytest.param(["--set", "executor_startup=-5"], "executor_startup must be a finite number >= 0", id="negative-sim-parameter"),
        pytest.param(["--set", "nope=1"], "unknown simulator parameter 'nope'", id="unknown-sim-parameter"),
        pytest.param(["--setting", "normalize.scale_down_delay=soon"], "normalize.scale_down_delay: expected a duration", id="bad-daemon-setting"),
        pytest.param(["--setting", "nope.x=1"], "nope: unknown key", id="unknown-daemon-setting"),
        pytest.param(["--setting", "policy.name=static"], "--setting policy.name: choose the policy with --policy", id="policy-as-a-setting"),
        # a setting the simulation takes from an option of its own was ignored (reconcile_interval:
        # the simulator steps by --tick) or bounded the policies but not the oracles (executors.max)
        pytest.param(["--setting", "reconcile_interval=5m"], "--setting reconcile_interval: the simulation steps by --tick", id="interval-not-tick"),
        pytest.param(["--setting", "executors.max=3", "--max-executors", "10"], "--setting executors.max: set it with --max-executors", id="max-beside-flag"),
        pytest.param(["--setting", "executors={max: 3}"], "--setting executors.max: set it with --max-executors", id="max-nested"),
        pytest.param(["--setting", "http.port=5"], "--setting http.port: not used by a simulation", id="shell-setting"),
        # within the simulation's ceiling (2 x --peak-executors, or --max-executors), not the
        # daemon's default maximum of 8 (a floor of 20 was refused as "must not exceed max (8)")
        pytest.param(["--setting", "executors.min=20", "--max-executors", "10"], "executors: min (20) must not exceed max (10)", id="floor-above-ceiling"),
        pytest.param(["--setting", "executors={min: 20}", "--max-executors", "10"], "executors: min (20) must not exceed max (10)", id="floor-above-ceiling-nested"),
        # int() ran 1.9 partitions as 1 while the JSON record said "1.9"; 0.5 cores read "must be > 0"
        pytest.param(["--set", "partitions=1.9"], "simulator parameter partitions: expected a whole number, got '1.9'", id="fraction-of-a-partition"),
        # no row a batch, no executor granted: accepted, and the run was one endless backlog
        pytest.param(["--set", "max_rows_per_batch=0"], "max_rows_per_batch must be >= 1 (or none), got 0", id="no-rows-a-batch"),
        pytest.param(["--set", "max_grantable_executors=0"], "max_grantable_executors must be >= 1 (or none), got 0", id="no-executor-granted"),
        pytest.param(["--set", "partitions=0"], "partitions must be >= 1 (or none), got 0", id="no-partitions"),
        pytest.param(["--set", "cores_per_executor=0.5"], "cores_per_executor: expected a whole number, got '0.5'", id="half-a-core"),
        # the last of two won without a word (a configuration file refuses a key given twice)
        pytest.param(["--param", "target_utilization=0.9", "--param", "target_utilization=0.5"], "--param target_utilization is given twice", id="param-twice"),
        pytest.param(["--set", "executor_startup=5", "--set", "executor_startup=6"], "--set executor_startup is given twice", id="set-twice"),
        # options a run of every policy would ignore
        pytest.param(["--compare", "--policy", "static"], "--policy applies to one policy; it cannot be combined with --compare", id="policy-with-compare"),
        pytest.param(["--compare", "--param", "x=1"], "--param applies to one policy", id="param-with-compare"),
        pytest.param(["--jobs", "2"], "--jobs runs the policies of --compare in parallel", id="jobs-without-compare"),
        pytest.param(["--policy", ""], "unknown policy ''", id="empty-policy-name"),
        pytest.param(["--peak-executors", "100001"], "peak executors must be within 1..100000", id="peak-beyond-any-cluster"),
        pytest.param(["--max-executors", "100001"], "max executors must be within 1..100000", id="max-beyond-any-cluster"),
        # a tick below the daemon's shortest interval was turned into the text "1e-07s", which the
        # settings then called no duration at all
        pytest.param(["--tick", "1e-7"], "the tick (the daemon's reconcile interval) must be within 0.1 s and 3650 days, got 1e-07 s", id="tick-too-short"),
        pytest.param(["--tick", "0.05"], "must be within 0.1 s and 3650 days, got 0.05 s", id="tick-below-100ms"),
        pytest.param(["--tick", "4e8"], "must be within 0.1 s and 3650 days, got 4e+08 s", id="tick-beyond-ten-years"),
        pytest.param(["--days", "0.00001"], "the simulated span (0.864 s) is shorter than one tick (10 s)", id="shorter-than-a-tick"),
        pytest.param(["--slo-lag-seconds", "1e300"], "the SLO lag must be > 0 s and at most 3650 days, got 1e+300 s", id="slo-beyond-ten-years"),
    ],
)
def test_bad_options_end_with_a_message_and_a_non_zero_exit(trace, capsys, args, message):
    assert main(["simulate", "--trace", str(trace), *args]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--peak-executors", "-2"], id="negative-peak"),
        pytest.param(["--peak-executors", "0"], id="zero-peak"),
        pytest.param(["--slo-lag-seconds", "-1"], id="negative-slo"),
        pytest.param(["--days", "-1"], id="negative-days"),
        pytest.param(["--seed", "-1"], id="negative-seed"),
        pytest.param(["--days", "soon"], id="non-numeric-days"),
    ],
)
def test_negative_or_malformed_numbers_are_refused(trace, capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--trace", str(trace), *args])
    assert exc.value.code != 0
    assert "error: argument" in capsys.readouterr().err


class _FailsAfterTenMinutes(Policy):
    """A policy with a bug: it raises from ten simulated minutes on (its 61st tick)."""

    needs_cost_model = False

    class Params(PolicyParams):
        pass

    def __init__(self, params: Params) -> None:
        self.started: datetime | None = None

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        self.started = self.started or inp.now
        if inp.now - self.started >= timedelta(minutes=10):
            raise ZeroDivisionError("float division by zero")
        return Proposal(executors=inp.target_executors, reason=Reason.WITHIN_TARGET)


@pytest.fixture
def broken_policy(monkeypatch):
    monkeypatch.setitem(_REGISTRY, "broken", _FailsAfterTenMinutes)
    monkeypatch.setattr(_FailsAfterTenMinutes, "name", "broken", raising=False)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--policy", "broken"], id="one-policy"),
        pytest.param(["--compare", "--jobs", "1"], id="compare"),
        pytest.param(["--compare", "--jobs", "2"], id="compare-in-worker-processes"),
    ],
)
def test_a_failing_tick_ends_with_when_where_and_why(trace, capsys, broken_policy, args):
    assert main(["simulate", "--trace", str(trace), *args]) != 0
    err = capsys.readouterr().err
    assert "the simulation stopped on day 0.01 (0:10:10 simulated)" in err
    assert "the policy step of a tick failed with policy 'broken': ZeroDivisionError: float division by zero" in err
    assert "Traceback" not in err


def test_a_tick_error_survives_pickling():
    error = pickle.loads(pickle.dumps(TickError("policy", ValueError("bad"))))
    assert (type(error), error.phase, str(error.cause), str(error)) == (TickError, "policy", "bad", "policy: bad")


def test_plot_hours_draws_the_window_of_the_run(trace, tmp_path, capsys, monkeypatch):
    from autoscaler.tools.sim import plot

    drawn = []
    real = plot.plot_run
    monkeypatch.setattr(plot, "plot_run", lambda result, path, window=None: drawn.append(window) or real(result, path, window))
    png = tmp_path / "burst.png"
    # the fixture's burst is at 20-30 minutes of its two hours
    assert main(["simulate", "--trace", str(trace), "--plot", str(png), "--plot-hours", "0.25:0.75"]) == 0
    assert drawn == [(900.0, 2700.0)]
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["--plot-hours", "0:1"], "give --plot", id="without-a-plot"),
        pytest.param(["--plot", "P", "--compare", "--plot-hours", "0:1"], "without --compare", id="with-compare"),
        pytest.param(["--plot", "P", "--plot-hours", "2:3"], "starts at hour 2, after the simulated 2 hours", id="after-the-run"),
        pytest.param(["--plot", "P", "--days", "0.01", "--plot-hours", "1:2"], "after the simulated 0.24 hours", id="after-the-days"),
    ],
)
def test_a_plot_window_that_cannot_be_drawn_is_refused_before_simulating(trace, tmp_path, capsys, args, message):
    png = tmp_path / "run.png"
    args = [str(png) if a == "P" else a for a in args]
    assert main(["simulate", "--trace", str(trace), *args]) == 2
    assert message in capsys.readouterr().err
    assert not png.exists()


@pytest.mark.parametrize(
    "window, message",
    [
        pytest.param("1", "is not FROM:TO", id="one-number"),
        pytest.param("2:1", "must end after it starts", id="backwards"),
        pytest.param("1:1", "must end after it starts", id="empty"),
        pytest.param("-1:2", "must be >= 0", id="negative"),
        pytest.param("a:2", "is not a number", id="not-a-number"),
    ],
)
def test_a_malformed_plot_window_is_a_usage_error(trace, tmp_path, capsys, window, message):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--trace", str(trace), "--plot", str(tmp_path / "run.png"), f"--plot-hours={window}"])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "where, message",
    [
        pytest.param(".", "is a directory; name a file", id="a-directory"),
        pytest.param("nodir/plot.png", "directory", id="missing-directory"),
        pytest.param("plot.txt", "must end in .png or .svg or .pdf", id="not-an-image"),
    ],
)
def test_a_plot_that_cannot_be_written_is_refused_before_simulating(trace, tmp_path, capsys, where, message):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--trace", str(trace), "--plot", str(out / where)])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert list(out.iterdir()) == []  # nothing simulated, nothing left behind


def test_an_output_file_is_tried_not_left_behind(trace, tmp_path, capsys):
    assert main(["settings-doc", "--output", str(tmp_path / "settings.md")]) == 0
    assert (tmp_path / "settings.md").read_text().startswith("# ")
    with pytest.raises(SystemExit):
        main(["settings-doc", "--output", "/proc/settings.md"])  # cannot be created, even by root
    assert "'/proc/settings.md' cannot be written" in capsys.readouterr().err


class _Terminal:
    """A stderr that says it is a terminal, keeping what is written."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_a_terminal_sees_how_far_the_simulation_is(trace, capsys, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "default"  # stdout holds the JSON alone
    lines = terminal.text.split("\r")
    shown = [line.strip() for line in lines if line.strip()]
    assert shown[0] == "simulating default on small: 0%" and shown[-1] == "simulating default on small: 100%"
    assert 50 <= len(shown) <= 101  # about every percent
    assert lines[-1] == "" and lines[-2].strip() == ""  # the line is wiped at the end


@pytest.mark.parametrize("jobs, last", [("1", "simulating static on small: 100%"), ("2", "simulating every policy on small: 100%")])
def test_a_terminal_sees_how_far_a_comparison_is(trace, capsys, monkeypatch, jobs, last):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr("autoscaler.tools.sim.compare.compared_policies", lambda: ["default", "static"])
    assert main(["simulate", "--trace", str(trace), "--compare", "--jobs", jobs, "--days", "0.04"]) == 0
    shown = [line.strip() for line in terminal.text.split("\r") if line.strip()]
    assert shown[-1] == last
    if jobs == "2":
        assert shown == ["simulating every policy on small: 50%", last]
    else:
        assert "simulating default on small: 100%" in shown and shown.index("simulating default on small: 100%") < shown.index("simulating static on small: 0%")


def test_no_progress_is_written_when_stderr_is_not_a_terminal(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8"]) == 0
    assert capsys.readouterr().err == ""


def test_more_days_than_the_trace_holds_simulate_all_of_it_and_say_so(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--json", "--days", "30"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["simulated_seconds"] == 2 * 3600
    assert "spark-autoscaler: note: trace 'small' covers 0.08 days; simulating all of it, not 30" in captured.err


def test_days_within_the_trace_print_no_note(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--json", "--days", "0.05"]) == 0
    assert capsys.readouterr().err == ""


def test_warnings_go_to_stderr_and_leave_the_json_alone(trace, capsys):
    structlog.reset_defaults()  # as in a fresh process: nothing configured the logs yet
    try:
        # a 2-minute trigger against the 60 s SLO: the daemon warns once (slo_below_schedule)
        args = ["simulate", "--trace", str(trace), "--json", "--set", "trigger_interval=120"]
        assert main(args) == 0
    finally:
        structlog.reset_defaults()
    captured = capsys.readouterr()
    assert json.loads(captured.out)["policy"] == "default"
    assert "slo_below_schedule" in captured.err


def test_a_command_whose_extra_is_missing_says_which_to_install(monkeypatch, capsys, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("matplotlib", "pyarrow") else real(name, *a))
    assert main(["demo"]) == 2
    assert "`demo` needs the demo extra (pyarrow is not installed): pip install 'spark-autoscaler[demo]'" in capsys.readouterr().err
    assert main(["dashboard", "render", "--recording", "r.jsonl", "--output", str(tmp_path / "d.png")]) == 2
    assert "pip install 'spark-autoscaler[plots]'" in capsys.readouterr().err


def test_a_trace_read_by_the_merge_rule_is_told_in_one_plain_line(trace, capsys):
    rows = trace.read_text().splitlines()
    trace.write_text("\n".join([*rows[:5], rows[4], *rows[5:]]) + "\n")  # one timestamp twice (an export repeated a row)
    assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8"]) == 0
    err = capsys.readouterr().err.splitlines()
    told = [line for line in err if "merged by order" in line]
    assert len(told) == 1 and told[0].startswith("spark-autoscaler: warning: trace ") and "1 row(s)" in told[0]
    assert not any("TraceOrderWarning" in line or "load_trace(" in line for line in err)  # not Python's format


def test_a_trace_with_an_outage_is_simulated_without_it_and_told_in_one_plain_line(trace, capsys):
    # the collector down for two days after the burst: refused until 2026-12-07 as a date typed wrong
    rows = trace.read_text().splitlines()
    moved = [f"{(datetime.fromisoformat(ts) + timedelta(days=2)).isoformat(sep=' ')},{v}" for ts, v in (r.split(",") for r in rows[8:])]
    trace.write_text("\n".join([*rows[:8], *moved]) + "\n")
    assert main(["simulate", "--trace", str(trace), "--json", "--peak-executors", "8"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["simulated_seconds"] == 24 * 300  # the two hours with rows, not two days more
    told = [line for line in captured.err.splitlines() if "skipped" in line]
    assert len(told) == 1 and told[0].startswith("spark-autoscaler: warning: trace ") and "the longest 2.003 days" in told[0], told
    assert not any("TraceGapWarning" in line for line in captured.err.splitlines())


def test_ticks_writes_every_tick_as_the_daemon_logs_it(trace, tmp_path, capsys):
    ticks = tmp_path / "ticks.jsonl"
    assert main(["simulate", "--trace", str(trace), "--days", "0.02", "--json", "--ticks", str(ticks)]) == 0
    result = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in ticks.read_text().splitlines()]
    assert [line["t"] for line in lines] == [10.0 * (i + 1) for i in range(len(lines))] and len(lines) >= 0.02 * 86400 / 10 - 1
    assert max(line["true_lag_seconds"] for line in lines) == pytest.approx(result["max_lag_seconds"], abs=10)
    assert {"inputs", "proposal", "decision", "plan"} <= set(lines[0])
    assert sum(line["acted"] for line in lines) == result["rescales"] > 0


def test_ticks_name_one_policy_not_compare(trace, tmp_path, capsys):
    assert main(["simulate", "--trace", str(trace), "--compare", "--ticks", str(tmp_path / "t.jsonl")]) == 2
    assert "--ticks applies to one policy" in capsys.readouterr().err
