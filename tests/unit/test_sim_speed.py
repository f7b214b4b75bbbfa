"""``spark-autoscaler benchmark sim-speed``: time and instructions per tick, and the decisions' fingerprint."""

import dataclasses
import enum
import json
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.cli import main
from autoscaler.tools.bench.sim_speed import (
    TICKS_30_DAYS,
    SimSpeedError,
    _collected,
    cache_kib,
    canonical,
    decision_fingerprint,
    instructions_per_tick,
    machine,
    wall_per_tick,
)


@pytest.fixture
def trace(tmp_path):
    """Three hours at a 5-minute step with a burst in the middle."""
    path = tmp_path / "burst.csv"
    t0 = datetime(2024, 3, 1)
    values = [10] * 12 + [45] * 6 + [10] * 18
    rows = [f"{(t0 + timedelta(minutes=5 * i)).isoformat(sep=' ')},{v}" for i, v in enumerate(values)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def test_wall_time_per_tick_and_what_it_makes_for_30_days(trace):
    out = wall_per_tick(trace, policy="static", days=0.02, repeats=2)
    assert (out["policy"], out["trace"], out["ticks"], out["repeats"]) == ("static", "burst", 172, 2)
    assert 0 < out["us_per_tick_min"] <= out["us_per_tick_median"]
    # 30 days at a 10-second tick are 259,200 ticks at the fastest run's pace
    assert TICKS_30_DAYS == 259_200
    assert out["projected_30_days_seconds"] == pytest.approx(out["us_per_tick_min"] * 259_200 / 1e6, abs=0.1)


def _cache(root, index, level, kind, size):
    folder = root / f"index{index}"
    folder.mkdir(parents=True)
    for name, text in (("level", level), ("type", kind), ("size", size)):
        (folder / name).write_text(f"{text}\n")


def test_the_machine_is_described_by_its_cpu_and_cache_sizes(tmp_path):
    caches = tmp_path / "cache"
    _cache(caches, 0, 1, "Data", "48K")
    _cache(caches, 1, 1, "Instruction", "64K")
    _cache(caches, 2, 2, "Unified", "2048K")
    _cache(caches, 3, 3, "Unified", "480M")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.60GHz\nflags\t: fpu\n")
    out = machine(caches, cpuinfo)
    assert (out["cpu"], out["l2_kib"], out["l3_kib"]) == ("Some CPU @ 2.60GHz", 2048, 480 * 1024)
    assert out["python"].startswith(("CPython 3.", "PyPy 3."))
    assert cache_kib(caches, 1) == 48  # the data cache, not the instruction cache
    assert cache_kib(caches, 4) is None  # no such level
    assert cache_kib(tmp_path / "no-sysfs", 2) is None
    missing = machine(tmp_path / "no-sysfs", tmp_path / "no-cpuinfo")
    assert (missing["l2_kib"], missing["l3_kib"]) == (None, None) and missing["cpu"]  # falls back to the platform's name


def test_the_fingerprint_is_the_same_for_the_same_run_and_moves_with_any_decision(trace):
    once = decision_fingerprint(trace, days=0.1)
    assert decision_fingerprint(trace, days=0.1) == once  # deterministic
    assert decision_fingerprint(trace, days=0.1, seed=1) != once  # other noise, other batches
    assert decision_fingerprint(trace, days=0.1, policy="static") != once


def test_callgrinds_collected_line_is_read():
    err = "==1== Events    : Ir\n==1== Collected : 312,546,136\n==1==\n==1== I   refs:      312,546,136\n"
    assert _collected(err) == 312_546_136
    assert _collected("valgrind: no such file") is None


def test_counting_instructions_without_valgrind_says_what_is_missing(trace, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(SimSpeedError, match="valgrind and callgrind_control"):
        instructions_per_tick(trace)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed (Debian package valgrind)")
def test_callgrind_counts_the_ticks_after_the_warm_up(trace):
    out = instructions_per_tick(trace, policy="static", warm_days=0.01, ticks=30)
    # a tick of the reconciler and the simulated cluster is hundreds of thousands of instructions
    assert (out["ticks"], out["warm_days"]) == (30, 0.01) and 50_000 < out["instructions_per_tick"] < 5_000_000


def test_cli_prints_json_with_the_fingerprint(trace, capsys):
    args = ["benchmark", "sim-speed", "--trace", str(trace), "--policy", "static", "--days", "0.02", "--repeats", "1"]
    assert main([*args, "--fingerprint", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fingerprint"] == decision_fingerprint(trace, policy="static", days=0.02)
    assert out["ticks"] == 172 and "instructions_per_tick" not in out
    assert set(out["machine"]) == {"python", "cpu", "cores", "l2_kib", "l3_kib"}
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "30 days at a 10-second tick" in text and "measured on CPython" in text and " L2 " in text


def test_cli_refuses_an_unknown_policy_with_a_message(trace, capsys):
    assert main(["benchmark", "sim-speed", "--trace", str(trace), "--policy", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err


def test_cli_refuses_a_span_of_no_days(trace, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["benchmark", "sim-speed", "--trace", str(trace), "--days", "0"])
    assert exit_.value.code == 2 and "--days" in capsys.readouterr().err


def test_cli_names_a_missing_trace(tmp_path, capsys):
    assert main(["benchmark", "sim-speed", "--trace", str(tmp_path / "none.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_fingerprint_form_names_what_a_decision_says_not_how_its_classes_are_written():
    @dataclasses.dataclass(frozen=True)
    class Result:  # the same fields as another class of another module
        action: str
        ok: bool

    class Kind(enum.StrEnum):
        SET_TARGET = "set_target"

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert canonical(Result(Kind.SET_TARGET, True)) == canonical(Result("set_target", True)) == {"action": "set_target", "ok": True}
    assert canonical({"at": at, "pause": timedelta(seconds=1.5), "rate": 0.1, "ids": ("1", "2")}) == {
        "at": "2026-01-01T00:00:00+00:00",
        "pause": "1.5",
        "rate": "0.1",
        "ids": ["1", "2"],
    }
