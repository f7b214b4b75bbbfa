"""``spark-autoscaler benchmark traces``: every policy on every trace at two scales, resumable, and
the default policy judged against the targets (and against the baselines)."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest

from autoscaler._version import __version__
from autoscaler.cli import main
from autoscaler.runtime.waiting import poll
from autoscaler.tools.bench.traces import format_report, judge, plan_runs, read_results
from autoscaler.tools.provenance import code_label, code_version
from tests.processes import below


def write_trace(path, values):
    t0 = datetime(2024, 3, 1)
    rows = [f"{(t0 + timedelta(minutes=5 * i)).isoformat(sep=' ')},{v}" for i, v in enumerate(values)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture
def traces(tmp_path):
    """Two two-hour traces in one directory: a burst, and a step."""
    d = tmp_path / "traces"
    d.mkdir()
    write_trace(d / "burst.csv", [10, 12, 11, 10, 40, 42, 12, 10, 11, 10, 12, 11] * 2)
    write_trace(d / "step.csv", [10] * 12 + [30] * 12)
    return d


def result(cost, slo, bound=1.0, rescales=10.0, overshoot=0.01, restarts=4, days=2.0):
    return {"cost_ratio": cost, "slo_violation_fraction": slo, "budget_oracle_cost_ratio": bound,
            "rescales_per_day": rescales, "overshoot_fraction": overshoot,
            "query_restarts": restarts, "simulated_seconds": days * 86400}


def test_a_baseline_beats_the_default_only_when_both_cheaper_and_with_fewer_slo_violations():
    default = result(1.5, 0.002)
    baselines = {"cheaper-and-better": result(1.4, 0.001), "cheaper-only": result(1.2, 0.003),
                 "better-only": result(1.6, 0.0), "equal": result(1.5, 0.002)}
    assert judge(default, baselines)["dominated_by"] == ["cheaper-and-better"]
    assert judge(default, baselines)["met"]["no_dominating_baseline"] is False
    assert judge(default, {"cheaper-only": result(1.2, 0.003)})["met"]["no_dominating_baseline"] is True


def test_the_bounds_own_overshoot_is_reported_from_any_result_that_has_it():
    old = result(1.5, 0.002, overshoot=0.2)  # made before simulate reported it
    assert judge(old, {})["bound_overshoot_fraction"] is None
    static = {**result(3.0, 0.0), "budget_oracle_overshoot_fraction": 0.138}
    judged = judge(old, {"static": static})
    assert judged["bound_overshoot_fraction"] == 0.138
    assert judged["met"]["overshoot"] is False  # the target stays the target; the bound says why
    rep = {"scales": {"p99": {"title": "p99", "traces": {"cvs": {"judged": judged, "results": {}}}}}}
    assert "| 20.0 ! | 13.8 |" in format_report(rep)


def test_the_ceilings_own_slo_violations_are_reported_beside_the_defaults():
    old = result(1.5, 0.0153)  # made before simulate reported it
    assert judge(old, {})["ceiling_slo_violation_fraction"] is None
    judged = judge({**old, "ceiling_slo_violation_fraction": 0.0131}, {})
    assert judged["ceiling_slo_violation_fraction"] == 0.0131
    assert judged["met"]["slo"] is False  # the target stays the target; the ceiling says why
    rep = {"scales": {"p99": {"title": "p99", "traces": {"aapl": {"judged": judged, "results": {}}}}}}
    assert "| 1.53 ! | 1.31 | 10.0 | 2.0 |" in format_report(rep)
    rep["scales"]["p99"]["traces"]["aapl"]["judged"] = judge(old, {})
    assert "| 1.53 ! | - | 10.0 | 2.0 |" in format_report(rep)


def test_the_query_restarts_a_day_are_reported_and_judge_nothing():
    # 99 restarts from the checkpoint in 4.5 days: 22 a day, beside 10 executor changes a day
    judged = judge(result(1.0, 0.0, restarts=99, days=4.5), {})
    assert judged["query_restarts_per_day"] == pytest.approx(22.0)
    assert all(judged["met"].values())  # not a target: a pause of the stream each, shown beside the rescales
    rep = {"scales": {"peak": {"title": "peak", "traces": {"elb": {"judged": judged, "results": {}}}}}}
    assert "| 0.00 | - | 10.0 | 22.0 | 1.0 |" in format_report(rep)


def test_the_online_ski_rental_is_reported_against_the_bound_from_any_result_that_has_it():
    old = result(1.6, 0.002, bound=1.25)  # 1.28x the bound
    assert judge(old, {})["ski_rental_x_bound"] is None
    judged = judge(old, {"static": {**result(3.0, 0.0, bound=1.25), "ski_rental_cost_ratio": 1.75}})
    assert judged["ski_rental_x_bound"] == pytest.approx(1.4)
    assert judged["met"]["x_bound"] is False  # the target stays the target; the reference says why
    rep = {"scales": {"p99": {"title": "p99", "traces": {"cvs": {"judged": judged, "results": {}}}}}}
    assert "| 1.40 | 1 |" in format_report(rep)


@pytest.mark.parametrize(
    ("figures", "missed"),
    [
        (result(1.2, 0.005, bound=1.0, rescales=23.9, overshoot=0.05), set()),  # every target just met
        (result(1.46, 0.0, bound=1.2), {"x_bound"}),  # 1.46 / 1.2 = 1.217
        (result(1.0, 0.0051), {"slo"}),
        (result(1.0, 0.0, rescales=24.0), {"rescales"}),
        (result(1.0, 0.0, overshoot=0.051), {"overshoot"}),
    ],
)
def test_each_target_is_judged_at_its_threshold(figures, missed):
    met = judge(figures, {})["met"]
    assert {k for k, ok in met.items() if not ok} == missed


def test_every_run_is_written_resumed_and_reported(traces, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["benchmark", "traces", "--traces", str(traces), "--results", str(results), "--policies", "static", "--scales", "peak,p99"]
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    files = sorted(p.relative_to(results).as_posix() for p in results.rglob("*.json"))
    assert files == [f"{s}/static-{t}.json" for s in ("p99", "peak") for t in ("burst", "step")]
    assert "0 of 4 runs already" in out.err
    rep = json.loads(out.out)
    assert all(t["judged"] is None for s in rep["scales"].values() for t in s["traces"].values())  # no default run yet
    assert main([*args[:-4], "--policies", "default,static", "--jobs", "2", "--json"]) == 0  # in two processes
    out = capsys.readouterr()
    assert "4 of 8 runs already" in out.err and "[4/4]" in out.err
    rep = json.loads(out.out)
    for scale in ("peak", "p99"):
        for trace in ("burst", "step"):
            entry = rep["scales"][scale]["traces"][trace]
            kept = json.loads((results / scale / f"default-{trace}.json").read_text())
            assert entry["judged"]["cost_ratio"] == kept["cost_ratio"] and entry["judged"]["baselines_run"] == ["static"]
            assert set(entry["results"]) == {"default", "static"}
    # the scales are what they say: p99 scales the 99th percentile to 16 executors
    p99 = json.loads((results / "p99" / "static-step.json").read_text())
    assert (p99["peak_executors"], p99["scale_quantile"]) == (16, 0.99)

    # a second call runs nothing and reports the same
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*.json")}
    assert main([*args, "--json"]) == 0
    again = capsys.readouterr()
    assert "4 of 4 runs already" in again.err and json.loads(again.out) == rep
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*.json")} == before


def test_a_run_not_there_is_reported_as_not_run(traces, tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["benchmark", "traces", "--traces", str(traces / "step.csv"), "--results", str(results),
                 "--policies", "default", "--scales", "peak"]) == 0
    capsys.readouterr()
    assert main(["benchmark", "traces", "--traces", str(traces), "--results", str(results), "--policies", "default",
                 "--scales", "peak", "--report-only"]) == 0
    table = capsys.readouterr().out
    assert "| burst | not run |" in table
    assert "| step | " in table and "| step | not run" not in table
    assert not (results / "peak" / "default-burst.json").exists()


@pytest.mark.parametrize("text", [b"{half", b'{"cost_ratio": 1.2}', b"[]", b"\xff\xfe"], ids=["torn", "no-kpis", "a-list", "not-utf-8"])
@pytest.mark.parametrize("report_only", [True, False], ids=["report", "resume"])
def test_a_damaged_result_file_is_named(traces, tmp_path, capsys, text, report_only):
    # a result that is not UTF-8 said "'utf-8' codec can't decode byte 0xff" and no file
    (tmp_path / "r" / "peak").mkdir(parents=True)
    (tmp_path / "r" / "peak" / "default-step.json").write_bytes(text)
    assert main(["benchmark", "traces", "--traces", str(traces / "step.csv"), "--results", str(tmp_path / "r"),
                 "--policies", "default", "--scales", "peak", *(["--report-only"] if report_only else [])]) == 2
    err = capsys.readouterr().err
    assert "default-step.json" in err and "remove it to run it again" in err


@pytest.mark.parametrize("damage", ["a-directory-where-a-result-goes", "a-file-where-a-scale-goes"])
def test_a_result_that_cannot_be_written_is_named_before_any_run(traces, tmp_path, capsys, damage):
    # each failed with a traceback after the simulation, its result lost
    if damage == "a-directory-where-a-result-goes":
        (tmp_path / "r" / "peak" / "default-step.json").mkdir(parents=True)
        named = "default-step.json: not a file"
    else:
        (tmp_path / "r").mkdir()
        (tmp_path / "r" / "peak").write_text("x")
        named = "peak: not a directory"
    assert main(["benchmark", "traces", "--traces", str(traces / "step.csv"), "--results", str(tmp_path / "r"),
                 "--policies", "default", "--scales", "peak"]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and "[1/1]" not in err, err


def test_a_policy_parameter_is_run_kept_and_checked_on_resume(traces, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["benchmark", "traces", "--traces", str(traces / "step.csv"), "--results", str(results), "--policies", "static", "--scales", "peak"]
    assert main([*args, "--param", "executors=3"]) == 0
    kept = json.loads((results / "peak" / "static-step.json").read_text())
    assert kept["policy_params"] == {"executors": 3} and 3 <= kept["mean_executors"] < 3.2  # 3 from the first decision
    capsys.readouterr()
    # resumed with another value (or none), the result is refused by name rather than reused
    for other in (["--param", "executors=5"], []):
        assert main([*args, *other]) == 2
        err = capsys.readouterr().err
        assert "static-step.json" in err and "run with policy parameters {'executors': 3}" in err
    assert main([*args, "--param", "executors=3"]) == 0 and "1 of 1 runs already" in capsys.readouterr().err


def test_a_daemon_setting_is_run_kept_and_checked_on_resume(traces, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["benchmark", "traces", "--traces", str(traces / "burst.csv"), "--results", str(results), "--policies", "default", "--scales", "peak"]
    assert main([*args, "--setting", "normalize.scale_down_delay=1h"]) == 0
    held = json.loads((results / "peak" / "default-burst.json").read_text())
    assert held["settings"] == {"normalize.scale_down_delay": "1h"} and held["policy_params"] == {}
    capsys.readouterr()
    for other in (["--setting", "normalize.scale_down_delay=0s"], []):
        assert main([*args, *other]) == 2
        assert "default-burst.json: run with settings {'normalize.scale_down_delay': '1h'}" in capsys.readouterr().err
    # the setting reached the runs: the burst's executors held an hour cost more than released
    assert main([*args[:5], str(tmp_path / "plain"), *args[6:]]) == 0
    plain = json.loads((tmp_path / "plain" / "peak" / "default-burst.json").read_text())
    assert "settings" not in plain and held["executor_seconds"] > 1.5 * plain["executor_seconds"]


def test_a_screening_simulates_the_first_days_keeps_them_and_never_passes_for_the_whole(tmp_path, capsys):
    d = tmp_path / "traces"
    d.mkdir()
    write_trace(d / "day.csv", [10] * 144 + [10, 40, 45, 40] * 36)  # quiet for 12 hours, then bursts
    week = tmp_path / "screening"
    args = ["benchmark", "traces", "--traces", str(d), "--results", str(week), "--policies", "default", "--scales", "peak"]
    assert main([*args, "--days", "0.5"]) == 0
    assert "**The first 0.5 days of each trace only**: a screening" in capsys.readouterr().out
    kept = json.loads((week / "peak" / "default-day.json").read_text())
    assert kept["first_days"] == 0.5 and kept["simulated_seconds"] <= 43200
    # whole, the bursts of the second half are run too
    whole = tmp_path / "whole"
    assert main([*args[:5], str(whole), *args[6:]]) == 0
    complete = json.loads((whole / "peak" / "default-day.json").read_text())
    assert "first_days" not in complete and complete["simulated_seconds"] > 80000
    capsys.readouterr()
    # the screening's results are never run on, reported or compared as other days' or the whole trace's
    refused = [
        ([*args], "a run of the first 0.5 days, not the whole trace"),
        ([*args, "--days", "1"], "a run of the first 0.5 days, not the first 1 day"),
        ([*args, "--report-only"], "a run of the first 0.5 days, not the whole trace"),
        ([*args[:5], str(whole), *args[6:], "--compare-to", str(week)], "a run of the first 0.5 days, not the whole trace"),
        ([*args, "--days", "0.5", "--compare-to", str(whole)], "a run of the whole trace, not the first 0.5 days"),
    ]
    for given, named in refused:
        assert main(given) == 2, given
        assert f"default-day.json: {named}" in capsys.readouterr().err, given
    assert main([*args, "--days", "0.5", "--report-only"]) == 0


def test_a_list_valued_policy_parameter_does_not_break_the_bookkeeping(traces, tmp_path):
    # a plugin policy may take a list (--param windows=[1,2]); results are kept by run
    [run] = plan_runs([traces / "step.csv"], ["peak"], ["static"], {"windows": [1, 2]})
    path = run.result_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**result(1.5, 0.0), "wall_seconds": 1.0, "policy_params": {"windows": [1, 2]}}))
    assert read_results([run], tmp_path)[run]["cost_ratio"] == 1.5


def _keep(results, scale, name, figures):
    path = results / scale / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**figures, "wall_seconds": 1.0}))


def test_a_change_is_compared_run_by_run_and_tallied_at_the_precision_shown(traces, tmp_path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    _keep(before, "peak", "default-burst", result(1.50, 0.0144, bound=1.2, rescales=33.8, overshoot=0.099, restarts=30))
    _keep(after, "peak", "default-burst", result(1.44, 0.0028, bound=1.2, rescales=33.8, overshoot=0.1004, restarts=11))
    _keep(before, "peak", "default-step", result(1.30, 0.0, rescales=10.0))
    _keep(after, "peak", "default-step", result(1.304, 0.0001, rescales=9.0))  # x bound even at 2 decimals
    _keep(before, "p99", "default-step", result(1.0, 0.0))  # the p99 step not run since: named, not compared
    args = ["benchmark", "traces", "--traces", str(traces), "--results", str(after), "--policies", "default", "--report-only",
            "--compare-to", str(before)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| burst | peak | 1.25 -> 1.20 | 1.44 -> 0.28 | 33.8 -> 33.8 | 9.9 -> 10.0 | 15.0 -> 5.5 |" in out
    assert "| step | peak | 1.30 -> 1.30 | 0.00 -> 0.01 | 10.0 -> 9.0 | 1.0 -> 1.0 | 2.0 -> 2.0 |" in out
    assert "- x bound: lower on 1, even on 1, higher on 0" in out
    assert "- SLO %: lower on 1, even on 0, higher on 1" in out
    assert "- rescales/day: lower on 1, even on 1, higher on 0" in out
    assert "- overshoot %: lower on 0, even on 1, higher on 1" in out
    assert "- query restarts/day: lower on 1, even on 1, higher on 0" in out
    assert "- only before: p99/step" in out
    assert main([*args, "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)["compared"]["policies"]["default"]
    assert compared["tally"]["SLO %"] == {"lower": 1, "even": 0, "higher": 1}
    assert compared["only_before"] == ["p99/step"] and compared["only_after"] == []


@pytest.mark.parametrize(("given", "named"), [("missing", "is not a directory of results"), ("r", "is the --results directory itself")])
def test_a_comparison_with_nothing_to_compare_to_is_refused(traces, tmp_path, capsys, given, named):
    (tmp_path / "r").mkdir()
    assert main(["benchmark", "traces", "--traces", str(traces), "--results", str(tmp_path / "r"), "--report-only",
                 "--compare-to", str(tmp_path / given)]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--scales", "peak,p95"], "--scales"),
        (["--policies", "no-such-policy"], "no-such-policy"),
        (["--policies", ","], "--policies: ',': name at least one policy"),  # ran nothing and exited 0
        (["--traces", "missing.csv"], "missing.csv"),
        (["--param", "no_such_knob=1"], "params.no_such_knob: unknown parameter"),
        (["--policies", "default,static", "--param", "hindsight=7d"], "--param applies to one policy"),
        (["--setting", "normalize.scale_down_delay=soon"], "--setting: invalid configuration"),
        (["--setting", "policy.params={}"], "--setting policy.params: choose the policy"),
        # each with its own reason: one sentence about the ceiling was given for all five
        (["--setting", "executors.max=3"], "--setting executors.max: every run's ceiling is twice what its --scales peak needs"),
        (["--setting", "executors.cores=2"], "--setting executors.cores: every run's executors have the simulator's default cores"),
        (["--setting", "slo.target_lag=1m"], "--setting slo.target_lag: every run is judged at the same SLO, the oracles too"),
        (["--setting", "executors.initial=2"], "--setting executors.initial: every run starts with the executors its first load needs"),
        (["--setting", "reconcile_interval=1s"], "--setting reconcile_interval: every run of the benchmark steps by the same tick"),
        (["--setting", "executors.min=65"], "executors: min (65) must not exceed max (64)"),  # the ceiling of the peak scale
    ],
)
def test_bad_arguments_are_named_before_anything_runs(tmp_path, extra, named, capsys):
    write_trace(tmp_path / "t.csv", [10] * 24)
    base = {"--traces": [str(tmp_path / "t.csv")], "--scales": ["peak"], "--policies": ["default"]}
    for i in range(0, len(extra), 2):
        base[extra[i]] = [str(tmp_path / extra[i + 1])] if extra[i] == "--traces" else [extra[i + 1]]
    args = ["benchmark", "traces", "--results", str(tmp_path / "r")] + [x for k, v in base.items() for x in (k, *v)]
    assert main(args) == 2
    assert named in capsys.readouterr().err
    assert not list((tmp_path / "r").rglob("*.json"))


def test_a_setting_given_twice_is_refused_before_any_run(tmp_path, capsys):
    write_trace(tmp_path / "t.csv", [10] * 24)
    assert main(["benchmark", "traces", "--traces", str(tmp_path / "t.csv"), "--results", str(tmp_path / "r"), "--policies", "default",
                 "--scales", "peak", "--setting", "normalize.dead_band=0.1", "--setting", "normalize.dead_band=0.2"]) == 2
    assert "--setting normalize.dead_band is given twice" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_bad_trace_is_named_before_any_run(tmp_path, capsys):
    write_trace(tmp_path / "good.csv", [10] * 24)
    (tmp_path / "bad.csv").write_text("timestamp,value\n2024-03-01 00:00:00,ten\n")
    assert main(["benchmark", "traces", "--traces", str(tmp_path), "--results", str(tmp_path / "r"),
                 "--policies", "default", "--scales", "peak"]) == 2
    assert "bad.csv" in capsys.readouterr().err
    assert not list((tmp_path / "r").rglob("*.json"))


def test_two_traces_with_one_name_are_refused(tmp_path, capsys):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        write_trace(tmp_path / d / "same.csv", [10] * 24)
    assert main(["benchmark", "traces", "--traces", str(tmp_path / "a"), str(tmp_path / "b"), "--results",
                 str(tmp_path / "r"), "--report-only"]) == 2
    assert "two traces named same" in capsys.readouterr().err


def _both_workers(pid: int) -> list[int]:
    """The pids of the two simulating workers below ``pid``, once both are there; else none."""
    workers = [w.pid for w in below(pid, recursive=False)]
    return workers if len(workers) >= 2 else []


def _ctrl_c_heeded() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["sigterm-to-the-command", "ctrl-c-to-the-process-group"])
def test_a_signal_stops_the_runs_at_once_and_leaves_no_partial_result(tmp_path, ctrl_c):
    """kill, or Ctrl-C in a terminal (SIGINT to the whole process group, the workers included),
    ends the command and its worker processes, and writes no result: before, the pool it ran in
    waited for every run still queued (hours on the shared traces)."""
    # 60 days of a daily cycle: the default policy takes minutes on it
    trace = write_trace(tmp_path / "long.csv", [1000 + 900 * math.sin(i * math.pi / 144) for i in range(288 * 60)])
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "benchmark", "traces", "--traces", str(trace), "--results", str(results), "--policies", "default", "--jobs", "2"],
        stderr=subprocess.PIPE, text=True, start_new_session=True,  # a process group of its own, as in a terminal
        # and Ctrl-C heeded, as in a terminal: a suite started in the background (`cmd &` in a
        # script) ignores SIGINT and its children inherit that, so the command never saw it
        preexec_fn=_ctrl_c_heeded,
    )
    try:
        assert "2 to run" in proc.stderr.readline()
        workers = poll(lambda: _both_workers(proc.pid), 60, 0.2) or []
        assert len(workers) == 2
        time.sleep(1.0)  # both simulating
        if ctrl_c:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert "interrupted" in proc.stderr.read()
    finally:
        if proc.poll() is None:  # the whole group: its workers simulated on for minutes after a failure
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not list(results.rglob("*.json"))


def test_sigterm_stops_a_compared_simulation_and_its_workers(tmp_path):
    """`simulate --compare --jobs 2` under kill or timeout: before, the command ended (143) and
    its two workers simulated on at 99 % CPU each."""
    trace = write_trace(tmp_path / "long.csv", [1000 + 900 * math.sin(i * math.pi / 144) for i in range(288 * 60)])
    proc = subprocess.Popen([sys.executable, "-m", "autoscaler", "simulate", "--trace", str(trace), "--compare", "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        workers = poll(lambda: _both_workers(proc.pid), 60, 0.2) or []
        assert len(workers) == 2
        time.sleep(1.0)  # both simulating
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert "interrupted" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_the_code_of_a_result_is_its_commit_and_whether_its_code_differed_from_it(tmp_path):
    repo = tmp_path / "repo"
    for name in ("autoscaler/a.py", "policies/p.py", "docs/d.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x = 1\n")
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert code_version(repo) == {"version": __version__, "commit": head, "modified": False}
    (repo / "docs/d.md").write_text("other\n")  # not code: the figures are the commit's
    assert code_version(repo)["modified"] is False
    (repo / "policies/new.py").write_text("y = 2\n")  # an untracked module is code
    assert code_version(repo) == {"version": __version__, "commit": head, "modified": True}
    assert code_label(code_version(repo)) == f"{head[:7]}+changes"
    (repo / "policies/new.py").unlink()
    (repo / "autoscaler/a.py").write_text("x = 2\n")
    assert code_version(repo)["modified"] is True
    # not the top of a checkout (an installed copy inside some repository), or no checkout at all
    assert code_version(repo / "autoscaler")["commit"] is None
    (tmp_path / "plain").mkdir()
    assert code_version(tmp_path / "plain") == {"version": __version__, "commit": None, "modified": None}
    assert code_label(code_version(tmp_path / "plain")) == f"version {__version__}"
    assert code_label(None) == "not recorded"


def test_each_result_keeps_its_code_and_the_report_counts_the_results_by_code(traces, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["benchmark", "traces", "--traces", str(traces), "--results", str(results)]
    assert main([*args, "--policies", "static"]) == 0
    capsys.readouterr()
    kept = json.loads((results / "peak" / "static-step.json").read_text())
    assert kept["code"] == code_version()
    # a result from before the code was kept reads as such beside them
    old = json.loads((results / "peak" / "static-burst.json").read_text())
    del old["code"]
    (results / "peak" / "static-burst.json").write_text(json.dumps(old))
    assert main([*args, "--policies", "static", "--report-only", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["code"] == {"static": {code_label(kept["code"]): 3, "not recorded": 1}}
    assert main([*args, "--policies", "static", "--report-only"]) == 0  # the most results first
    assert f"Code of the results: static {code_label(kept['code'])} (3), not recorded (1)" in capsys.readouterr().out
