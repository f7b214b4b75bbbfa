"""The contract every :class:`autoscaler.runtime.ports.StateStore` must pass.

Subclass :class:`StateStoreContract` in a ``Test...`` class and provide the ``open_store``
fixture: a callable that opens a store on the *same* backing each time it is called, so a
second call stands for the daemon restarting (a new process reading what the old one saved).
The file store runs it in ``tests/unit/test_state_file.py``; the Kubernetes ConfigMap store in
``tests/unit/k8s/test_configmap_state_store.py``, over an in-memory fake of its ConfigMap protocol.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any, Callable

import pytest

from autoscaler.core.model import Mode, QueryParams
from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.config import load_settings
from autoscaler.runtime.ports import StateStore
from autoscaler.runtime.reconciler import Reconciler
from tests.fakes import FakeCluster, LoadFeeder, query_view

OpenStore = Callable[[], StateStore]


class StateStoreContract:
    @pytest.fixture
    def open_store(self) -> OpenStore:  # pragma: no cover - provided by each implementation
        raise NotImplementedError

    def test_a_new_store_has_no_state(self, open_store: OpenStore) -> None:
        assert open_store().load() is None

    def test_a_new_store_can_be_written_and_the_check_changes_nothing(self, open_store: OpenStore) -> None:
        store = open_store()
        store.check_writable()
        assert open_store().load() is None

    def test_saved_state_loads_back_equal(self, open_store: OpenStore) -> None:
        store = open_store()
        store.save({"a": 1})
        assert store.load() == {"a": 1}

    def test_state_survives_reopening_the_store(self, open_store: OpenStore) -> None:
        open_store().save({"control": {"paused": True}})
        assert open_store().load() == {"control": {"paused": True}}

    def test_a_save_replaces_the_whole_previous_state(self, open_store: OpenStore) -> None:
        store = open_store()
        store.save({"a": 1, "b": 2})
        store.save({"c": 3})
        assert open_store().load() == {"c": 3}

    def test_json_values_round_trip(self, open_store: OpenStore) -> None:
        state: dict[str, Any] = {
            "text": "naïve ✓ \"quoted\" \n newline",
            "int": 2**53,
            "float": 0.1,
            "negative": -3.5,
            "bool": False,
            "none": None,
            "list": [1, "two", None, [3]],
            "nested": {"deep": {"deeper": {"x": []}}},
            "empty": {},
        }
        open_store().save(state)
        assert open_store().load() == state

    def test_mutating_the_saved_dict_afterwards_does_not_change_the_state(self, open_store: OpenStore) -> None:
        store = open_store()
        state: dict[str, Any] = {"events": [1]}
        store.save(state)
        state["events"].append(2)
        assert open_store().load() == {"events": [1]}

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param({"when": object()}, id="object-value"),
            pytest.param({"nan": float("nan")}, id="nan"),
            pytest.param({"inf": float("inf")}, id="infinity"),
        ],
    )
    def test_a_state_that_is_not_json_is_rejected_and_the_previous_state_kept(self, open_store: OpenStore, bad: dict) -> None:
        store = open_store()
        store.save({"good": True})
        with pytest.raises((TypeError, ValueError)):
            store.save(bad)
        assert open_store().load() == {"good": True}

    def test_concurrent_saves_leave_one_complete_state(self, open_store: OpenStore) -> None:
        store = open_store()
        states = [{"writer": i, "payload": list(range(200))} for i in range(8)]
        threads = [threading.Thread(target=store.save, args=(s,)) for s in states]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert open_store().load() in states

    def test_a_large_history_round_trips(self, open_store: OpenStore) -> None:
        events = [{"at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00", "subject": "executors", "from": i, "to": i + 1,
                   "reason": "ScaleUpForLoad", "pause_seconds": None} for i in range(500)]
        open_store().save({"history": {"events": events}})
        assert open_store().load() == {"history": {"events": events}}

    def test_a_restarted_reconciler_resumes_overrides_history_and_pending_scale_down(self, open_store: OpenStore) -> None:
        """Restart the daemon mid-run: it resumes with the same overrides and history."""
        clock = FakeClock()
        settings = load_settings(
            None,
            {"executors.max": 6, "policy.name": "target-utilization", "normalize.scale_down_delay": "60s", "normalize.stabilization": "0s", "window.metrics_window": "30s"},
            environ={},
        )
        cluster = FakeCluster(clock.now(), executors=1)
        cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
        feeder = LoadFeeder(cluster, "q", clock.now())

        def reconciler() -> Reconciler:
            return Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=open_store())

        first = reconciler()
        for rate in [2500] * 18 + [400] * 6:  # up to 4 executors, then a scale-down starts waiting
            clock.advance(5)
            feeder.run_until(clock.now(), rate)
            first.tick()
        assert first.history.events and first.history.scale_down_since is not None
        first.update_control(
            lambda c: replace(
                c,
                mode=Mode.ACTIVE,
                dry_run=True,
                max_executors=5,
                policy_params={"target_utilization": 0.6},
                query_requests={"q": QueryParams(parallelism=8, trigger_interval=timedelta(seconds=4), max_rows_per_batch=500)},
            )
        )
        first.update_control(lambda c: replace(c, paused=True))

        second = reconciler()  # a new process on the same store
        assert second.control == first.control
        assert second.history == first.history
        assert second.history.scale_down_since == first.history.scale_down_since
        assert second.policy.p.target_utilization == 0.6  # type: ignore[attr-defined]
        clock.advance(5)
        record = second.tick()
        assert record.paused and record.dry_run and record.results == ()
        assert record.mode.configured == Mode.ACTIVE
        assert second.bounds() == (1, 5)
