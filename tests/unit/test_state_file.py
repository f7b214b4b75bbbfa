"""The local file state store: the state-store contract plus what is special about files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.config import load_settings
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.runtime.state import (
    FileStateStore,
    MemoryStateStore,
    StateStoreError,
    open_state_store,
)
from tests.contracts.state_store import StateStoreContract
from tests.fakes import FakeCluster


class TestFileStateStore(StateStoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        path = tmp_path / "state" / "autoscaler.json"
        return lambda: FileStateStore(path)


class TestMemoryStateStore(StateStoreContract):
    @pytest.fixture
    def open_store(self):
        store = MemoryStateStore()
        return lambda: store


@pytest.mark.parametrize(
    "content, problem",
    [
        pytest.param("{not json", "not valid JSON", id="torn-json"),
        pytest.param("[1, 2]", "expected an object with a 'state' object", id="not-an-object"),
        pytest.param('{"version": 99, "state": {}}', "unsupported state format version 99", id="future-version"),
        # saved as UTF-16 (a byte-order mark 0xff 0xfe): was a bare UnicodeDecodeError
        pytest.param(b"\xff\xfe{}", "is not UTF-8 text (invalid start byte at byte 0)", id="not-utf-8"),
        # was a RecursionError traceback
        pytest.param("[" * 100_000 + "]" * 100_000, "not valid state (nested too deeply)", id="nested-too-deeply"),
    ],
)
def test_an_unreadable_state_file_stops_start_up_naming_the_file(tmp_path: Path, content: str | bytes, problem: str) -> None:
    path = tmp_path / "s.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(StateStoreError) as info:
        FileStateStore(path).load()
    assert str(path) in str(info.value) and problem in str(info.value)


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.json"
    store = FileStateStore(path)
    store.save({"v": 1})

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(StateStoreError, match="cannot be written: .*No space left"):
        store.save({"v": 2})
    monkeypatch.undo()
    assert FileStateStore(path).load() == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_an_unchanged_state_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    store = FileStateStore(path)
    store.save({"v": 1})
    before = path.stat().st_mtime_ns
    os.utime(path, ns=(before - 10**9, before - 10**9))
    store.save({"v": 1})
    assert path.stat().st_mtime_ns == before - 10**9


def test_the_file_is_readable_json_for_operators(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    FileStateStore(path).save({"control": {"paused": True}})
    assert '"paused": true' in path.read_text()


def test_settings_choose_the_file_store_only_when_a_path_is_set(tmp_path: Path) -> None:
    assert open_state_store(load_settings(environ={})) is None
    store = open_state_store(load_settings(None, {"state.path": str(tmp_path / "s.json")}, environ={}))
    assert isinstance(store, FileStateStore) and store.path == tmp_path / "s.json"


@pytest.mark.parametrize(
    "state, problem",
    [
        pytest.param({"control": {"paused": "no"}}, "control.paused: Input should be a valid boolean", id="paused-as-text"),
        pytest.param({"control": {"min_executors": "3"}}, "control.min_executors: Input should be a valid integer", id="bound-as-text"),
        pytest.param({"control": {"mode": "sideways"}}, "control.mode: Input should be 'auto', 'reactive' or 'active'", id="unknown-mode"),
        pytest.param({"control": {"pasued": True}}, "control.pasued: Extra inputs are not permitted", id="misspelt-key"),
        pytest.param({"history": {"events": [{}]}}, "history.events.0.at: Field required", id="event-without-fields"),
        pytest.param(
            {"history": {"events": [{"at": "2026-01-01T00:00:00", "subject": "executors", "from": 1, "to": 2, "reason": "ScaleUpForLoad"}]}},
            "history.events.0.at: Input should have timezone info",
            id="time-without-zone",
        ),
        pytest.param({"history": {"rates": [["2026-01-01T00:00:00+00:00", "q"]]}}, "history.rates.0.2: Field required", id="short-rate"),
        pytest.param({"control": {"query_requests": {"q": {"parallelism": 0.5}}}}, "control.query_requests.q.parallelism", id="fractional-partitions"),
        # counts Spark cannot take were reported restorable
        pytest.param({"queries": {"q": {"running": {"parallelism": -3}, "declared": {"parallelism": 1}}}},
                     "queries.q.running.parallelism: Input should be greater than or equal to 1", id="negative-partitions"),
        pytest.param({"queries": {"q": {"running": {"parallelism": 2**31}, "declared": {"parallelism": 1}}}},
                     "queries.q.running.parallelism: Input should be less than or equal to 2147483647", id="partitions-beyond-a-java-int"),
        pytest.param({"queries": {"q": {"running": {"parallelism": 2, "shuffle_partitions": 0}, "declared": {"parallelism": 1}}}},
                     "queries.q.running.shuffle_partitions: Input should be greater than or equal to 1", id="no-shuffle-partitions"),
        pytest.param({"queries": {"q": {"running": {"parallelism": 2, "max_rows_per_batch": 10**23}, "declared": {"parallelism": 1}}}},
                     "queries.q.running.max_rows_per_batch: Input should be less than or equal to 9223372036854775807", id="rate-limit-beyond-a-java-long"),
        pytest.param({"control": {"query_requests": {"q": {"parallelism": 0}}}},
                     "control.query_requests.q.parallelism: Input should be greater than or equal to 1", id="requested-no-partitions"),
        # a number passed the time check and then crashed the restore with a TypeError
        pytest.param({"history": {"scale_down_since": 1700000000}}, "history.scale_down_since: Value error, a time is an ISO 8601 text", id="time-as-number"),
        pytest.param({"history": {"recommendations": [["yesterday", 3]]}}, "history.recommendations.0.0: Value error, Invalid isoformat string", id="time-as-word"),
        pytest.param({"history": {"rates": [["2026-01-01T00:00:00+00:00", "q", "3.5"]]}}, "history.rates.0.2: Input should be a valid number", id="rate-as-text"),
        pytest.param(
            {"control": {"query_requests": {"q": {"parallelism": 4, "trigger_interval_seconds": "10"}}}},
            "control.query_requests.q.trigger_interval_seconds: Input should be a valid number",
            id="seconds-as-text",
        ),
    ],
)
def test_a_state_the_reconciler_cannot_restore_stops_start_up_naming_the_entry(tmp_path: Path, state: dict, problem: str) -> None:
    store = FileStateStore(tmp_path / "s.json")
    store.save(state)
    settings = load_settings(None, {}, environ={})
    clock = FakeClock()
    cluster = FakeCluster(clock.now(), executors=1)
    with pytest.raises(StateStoreError) as info:
        Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    message = str(info.value)
    assert message.startswith(f"state file {str(tmp_path / 's.json')!r}: the saved state does not fit this daemon")
    assert problem in message and message.endswith("fix or remove it to start afresh")


def test_run_check_says_whether_the_saved_state_can_be_restored(tmp_path: Path, capsys) -> None:
    from autoscaler.cli import main

    pipelines = str(Path(__file__).parents[1] / "integration" / "sample_pipelines.py")
    path = tmp_path / "s.json"
    FileStateStore(path).save({"control": {"paused": True}})
    assert main(["run", "--pipelines", pipelines, "--state-file", str(path), "--check"]) == 0
    assert f"state file {str(path)!r} restorable" in capsys.readouterr().out
    FileStateStore(path).save({"control": {"paused": "no"}})
    assert main(["run", "--pipelines", pipelines, "--state-file", str(path), "--check"]) == 2
    assert "control.paused: Input should be a valid boolean" in capsys.readouterr().err


def test_run_check_tells_the_saved_overrides_start_up_would_drop(tmp_path: Path, capsys) -> None:
    # "restorable", and then the start-up dropped the bound that no longer fit (only its log said so)
    from autoscaler.cli import main

    pipelines = str(Path(__file__).parents[1] / "integration" / "sample_pipelines.py")
    path = tmp_path / "s.json"
    FileStateStore(path).save({"control": {"paused": True, "min_executors": 9}})
    assert main(["run", "--pipelines", pipelines, "--state-file", str(path), "--max-executors", "4", "--check"]) == 0
    assert capsys.readouterr().out.strip().endswith(
        f"state file {str(path)!r} restorable, but start-up drops its overrides that no longer fit the configuration: "
        "min_executors: min_executors (9) must not exceed max_executors (4)"
    )


def test_a_state_file_that_cannot_be_written_stops_run_before_spark(tmp_path: Path, capsys) -> None:
    from autoscaler.cli import main

    pipelines = str(Path(__file__).parents[1] / "integration" / "sample_pipelines.py")
    # readable (no file yet) but not writable, whatever the user's permissions: /proc takes no files
    assert main(["run", "--pipelines", pipelines, "--state-file", "/proc/spark-autoscaler/s.json", "--check"]) == 2
    assert "state file '/proc/spark-autoscaler/s.json': cannot be written" in capsys.readouterr().err
    # a directory that does not exist yet is fine (the first save creates it); the check leaves nothing
    later = tmp_path / "later" / "deeper" / "s.json"
    assert main(["run", "--pipelines", pipelines, "--state-file", str(later), "--check"]) == 0
    assert list(tmp_path.iterdir()) == []


def test_what_the_reconciler_saves_is_restored_whole() -> None:
    """The saved-state models are the one description of the file: everything the writers
    (``to_json``) put in comes back equal, times keeping their zones, in time order."""
    import json
    from datetime import datetime, timedelta, timezone

    from autoscaler.core.control import ControlState
    from autoscaler.core.history import RatePoint, ScalingEvent, ScalingHistory
    from autoscaler.core.model import Mode, QueryParams, Reason
    from autoscaler.runtime.state.schema import restore_state

    utc, cet = timezone.utc, timezone(timedelta(hours=1))
    t0 = datetime(2026, 11, 22, 10, 0, tzinfo=utc)
    history = ScalingHistory(
        events=(
            ScalingEvent(t0, "executors", 2, 5, Reason.SCALE_UP_FOR_LOAD),
            ScalingEvent(t0 + timedelta(seconds=30), "q", 10, 20, Reason.POLICY_PARALLELISM, timedelta(seconds=2.5)),
        ),
        recommendations=((t0, 5), (datetime(2026, 11, 22, 11, 0, 10, tzinfo=cet), 4)),
        scale_down_since=datetime(2026, 11, 22, 11, 0, 5, 250000, tzinfo=cet),
        rates=(RatePoint(t0, "q", 0.0), RatePoint(t0 + timedelta(minutes=5), "q", 1234.5)),
    )
    control = ControlState(
        paused=True,
        mode=Mode.ACTIVE,
        dry_run=False,
        min_executors=1,
        max_executors=9,
        manual_executors=3,
        policy_params={"target_utilization": 0.8, "horizon": "10m"},
        query_requests={"q": QueryParams(parallelism=8, shuffle_partitions=16, trigger_interval=timedelta(seconds=2.5), max_rows_per_batch=1000)},
    )
    from autoscaler.core.plan import QueryResume
    from autoscaler.runtime.state.schema import Restored, queries_json

    queries = {"q": QueryResume(QueryParams(12, None, timedelta(seconds=2), 500), QueryParams(4, None, timedelta(seconds=2), None))}
    saved = json.loads(json.dumps({"history": history.to_json(), "control": control.to_json(), "queries": queries_json(queries)}))
    restored = restore_state(saved, "test")
    assert (restored.history, restored.control, restored.queries) == (history, control, queries)
    assert restored.history.scale_down_since is not None and restored.history.scale_down_since.utcoffset() == timedelta(hours=1)
    assert restore_state({}, "test") == Restored()
