"""The local file state store: the state-store contract plus what is special about files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoscaler.clock import FakeClock
from autoscaler.reconciler import Reconciler
from autoscaler.settings import load_settings
from autoscaler.state import FileStateStore, MemoryStateStore, StateStoreError, open_state_store
from tests.fakes import FakeCluster
from tests.contracts.state_store import StateStoreContract


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
    ],
)
def test_an_unreadable_state_file_stops_start_up_naming_the_file(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "s.json"
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
