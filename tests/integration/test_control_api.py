"""The control API of a real running daemon on a real Spark cluster (local-cluster[2,1,512]).

One daemon (driver mode, HTTP on an ephemeral loopback port, a token file) hosts a steady
stream of 300 rows/s; the tests drive it only through HTTP, in order, and check that each
change shows on the next tick and in the cluster:

* pause stops actions (a manual target set while paused is decided but not applied) and
  resume applies it;
* a mode switch and dry run change the next tick;
* a rate-limit and trigger change restarts the query at a batch boundary with the new limit;
* at the end every generated row came out exactly once across the restarts, and a daemon
  restarted on the same state file comes back with the operator's overrides.

The static policy holds one executor, so every executor change here comes from an operator.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from datetime import timedelta

import httpx
import pytest

from autoscaler.app.driver import DriverDaemon
from autoscaler.core.model import Mode, QueryStatus, Reason
from autoscaler.runtime.config import load_settings
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.tools.demo.workload import drain, trace_pipeline
from autoscaler.tools.traces import RateProfile
from tests.integration.conftest import (
    assert_every_row_once,
    batches_since,
    newest,
    wait_until,
)

pytestmark = pytest.mark.spark

TOKEN = "integration-token-5f2d8c0e7a"
QUERY = "stream"


class Running:
    """The daemon under test, its tick records and an authenticated HTTP client."""

    def __init__(self, daemon: DriverDaemon, records: list, thread: threading.Thread, build, out, ckpt, settings, spec) -> None:
        self.daemon, self.records, self.thread = daemon, records, thread
        self.build, self.out, self.ckpt, self.settings, self.spec = build, out, ckpt, settings, spec
        assert daemon.http is not None
        self.client = httpx.Client(base_url=daemon.http.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)

    def change(self, method: str, path: str, body: dict | None = None):
        """Make a change; return the first tick that started after it was applied."""
        response = self.client.request(method, path, json=body)
        assert response.status_code == 200, response.text
        n = len(self.records)  # ticks hold the reconciler lock: every later record saw the change
        return wait_until(lambda: self.records[n] if len(self.records) > n else None, 30, f"the tick after {method} {path}")

    def ticks_after(self, n: int, count: int):
        wait_until(lambda: len(self.records) >= n + count, 30 + 2 * count, f"{count} ticks")
        return self.records[n:n + count]

    def executors(self) -> int:
        """Registered executors (1 core each), read without touching the daemon's own observation state."""
        return self.daemon.executors.registered_cores()  # type: ignore[union-attr]

    def query_view(self):
        return next(v for v in self.daemon.host.views() if v.name == QUERY)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def running(spark_session_factory, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("control")
    spark = spark_session_factory("local-cluster[2,1,512]")
    tokens = tmp / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    start = time.time() + 5
    out, ckpt = tmp / "out", tmp / "ckpt"
    build = trace_pipeline(profile=RateProfile.steps([(3600, 300)]), start=start, cost_seconds=0.0005, out_dir=out)
    # partitions pinned to 2: no automatic rescale, only the operator's
    spec = PipelineSpec(QUERY, build, trigger=timedelta(seconds=1), initial_parallelism=2, min_parallelism=2, max_parallelism=2)
    settings = load_settings(
        None,
        {
            "mode": "active",
            "executors.min": 1,
            "executors.max": 2,
            "executors.initial": 1,
            "reconcile_interval": "1s",
            "resource_wait_timeout": "30s",
            "request_timeout": "60s",
            "policy.name": "static",
            "policy.params": {"executors": 1},
            "normalize.stabilization": "0s",
            "normalize.scale_down_delay": "0s",
            "pipelines.checkpoint_root": str(ckpt),
            "http.port": 0,
            "http.token_file": str(tokens),
            "state.path": str(tmp / "state.json"),
        },
        environ={},
    )
    records: list = []
    daemon = DriverDaemon(settings, specs=[spec], spark=spark, on_tick=records.append)
    r = None
    try:  # from the start on: a failed check must not leave the daemon and its query running
        report = daemon.start()
        assert report.mode == Mode.ACTIVE
        thread = threading.Thread(target=daemon.loop.run, daemon=True)  # type: ignore[union-attr]
        thread.start()
        r = Running(daemon, records, thread, build, out, ckpt / QUERY, settings, spec)
        wait_until(lambda: r.client.get("/readyz").status_code == 200, 60, "the daemon to be ready")
        wait_until(lambda: len(r.query_view().samples) >= 3, 120, "the first batches")
        yield r
    finally:
        if r is not None:
            r.client.close()
        daemon.shutdown()
        if r is not None:
            r.thread.join(30)


def test_status_metrics_and_audit_are_served_by_the_running_daemon(running):
    status = running.client.get("/api/v1/status").json()
    assert status["mode"]["effective"] == "active" and status["executors"]["alive"] == 1
    [query] = status["queries"]
    assert query["name"] == QUERY and query["status"] == "running" and query["params"]["parallelism"] == 2
    wait_until(lambda: (running.client.get(f"/api/v1/queries/{QUERY}").json()["metrics"] or {}).get("input_rows_per_second"),
               60, "an input rate for the query")
    text = running.client.get("/metrics").text
    assert 'spark_autoscaler_executors{application="spark-autoscaler-test"} 1.0' in text
    assert f'spark_autoscaler_query_partitions{{application="spark-autoscaler-test",query="{QUERY}"}} 2.0' in text
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert check.returncode == 0 and not check.stdout, check.stdout + check.stderr
    assert running.client.post("/api/v1/control/pause", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_pause_stops_actions_on_the_next_tick_and_resume_applies_what_was_decided(running):
    paused = running.change("POST", "/api/v1/control/pause", {"note": "integration test"})
    assert paused.paused and paused.results == ()
    decided = running.change("PATCH", "/api/v1/control", {"manual_executors": 2})
    assert decided.paused and decided.decision.target == 2 and decided.decision.reason == Reason.MANUAL_TARGET
    n = len(running.records)
    held = running.ticks_after(n, 5)
    assert all(r.paused and r.results == () for r in held)
    assert running.executors() == 1  # decided, not applied
    resumed = running.change("POST", "/api/v1/control/resume")
    assert not resumed.paused
    assert any(res.action == "set_target" and res.ok for res in resumed.results)
    wait_until(lambda: running.executors() == 2, 90, "the second executor after resume")
    back = running.change("PATCH", "/api/v1/control", {"manual_executors": None})
    assert back.decision.target == 1 and back.decision.reason == Reason.STATIC_TARGET
    wait_until(lambda: running.executors() == 1, 90, "the executor to be released")
    who = [(e["who"], e["what"]) for e in running.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"]]
    assert ("alice", "paused: false -> true") in who and ("alice", "manual_executors: 2 -> default") in who


def test_a_mode_switch_takes_effect_on_the_next_tick(running):
    reactive = running.change("PATCH", "/api/v1/control", {"mode": "reactive"})
    assert reactive.mode.mode == Mode.REACTIVE and reactive.mode.reason == Reason.MODE_CONFIGURED
    assert not any(res.action == "set_target" for res in reactive.results)  # reactive mode never requests executors
    assert running.client.get("/api/v1/status").json()["mode"]["configured"] == "reactive"
    active = running.change("PATCH", "/api/v1/control", {"mode": None})
    assert active.mode.mode == Mode.ACTIVE


def test_dry_run_decides_without_acting(running):
    dry = running.change("PATCH", "/api/v1/control", {"dry_run": True, "manual_executors": 2})
    assert dry.dry_run and dry.decision.target == 2 and dry.results == ()
    later = running.ticks_after(len(running.records), 4)
    assert all(r.dry_run and r.decision.target == 2 and r.results == () for r in later)  # every tick, not the first
    assert running.executors() == 1
    entries = running.client.get("/api/v1/decisions", params={"kind": "decision", "limit": 5}).json()["entries"]
    assert any("[dry run: not applied]" in e["what"] for e in entries)
    undone = running.change("PATCH", "/api/v1/control", {"dry_run": None, "manual_executors": None})
    assert not undone.dry_run and undone.decision.target == 1


def test_a_rate_limit_and_trigger_change_restarts_the_query_at_a_batch_boundary(running):
    before = running.query_view()
    assert before.params.max_rows_per_batch is None
    record = running.change("PATCH", f"/api/v1/queries/{QUERY}", {"max_rows_per_batch": 100, "trigger_interval_seconds": 2})
    [change] = record.plan.query_changes
    assert change.reason == Reason.OPERATOR_REQUEST and change.to_params.max_rows_per_batch == 100
    assert any(res.action == "rescale" and res.ok for res in record.results)

    def restarted():
        v = running.query_view()
        return v if v.status == QueryStatus.RUNNING and v.params.max_rows_per_batch == 100 else None

    view = wait_until(restarted, 120, "the query to restart with the rate limit")
    assert view.params.trigger_interval == timedelta(seconds=2)

    def limited_batches():
        v = running.query_view()
        return [s for s in v.samples if v.run_started_at is not None and s.started_at >= v.run_started_at]

    batches = wait_until(lambda: (b := limited_batches()) and len(b) >= 6 and b, 90, "batches under the rate limit")
    # the first batch of the new run may be the replay of a batch the stop interrupted: its
    # offsets are pinned in the offset log (replaying them exactly is what keeps an idempotent
    # sink exactly-once), so the limit applies from the first batch planned by the new run
    planned = [b.input_rows for b in batches[1:]]
    assert all(rows <= 100 for rows in planned), [b.input_rows for b in batches]
    # 600 rows arrive per 2 s trigger: the limit binds (CI once saw a 4576-row replay first, so
    # the replayed batch is left out here as well)
    assert max(planned) == 100, [b.input_rows for b in batches]
    # and Spark fires at the new trigger: its processing-time trigger runs at multiples of the
    # interval, so a batch that ended before the next 2-s boundary is followed by one starting on
    # that boundary (at the old 1-s trigger about half of them would start on odd seconds; a
    # batch that overran its interval is followed at once, off the boundary, so it is left out)
    on_time = [b for a, b in zip(batches[1:], batches[2:]) if a.ended_at.timestamp() < (a.started_at.timestamp() // 2 + 1) * 2 - 0.1]
    starts = [round(b.started_at.timestamp() % 2, 3) for b in batches]
    assert len(on_time) >= 2, starts
    assert all(b.started_at.timestamp() % 2 < 0.5 for b in on_time), starts

    def explained():
        for e in running.client.get("/api/v1/decisions", params={"kind": "decision"}).json()["entries"]:
            for res in e["details"]["results"]:
                if res["action"] == "rescale" and res["subject"] == QUERY and "outcome" in res:
                    return e, res["outcome"]
        return None

    entry, outcome = wait_until(explained, 60, "the rescale's outcome in the audit trail")
    assert entry["reason"] == Reason.OPERATOR_REQUEST.value and "rate limit none -> 100 rows/batch" in entry["what"]
    assert outcome["ok"] and outcome["pause_seconds"] > 0
    metrics = running.client.get("/metrics").text
    assert f'spark_autoscaler_query_max_rows_per_batch{{application="spark-autoscaler-test",query="{QUERY}"}} 100.0' in metrics

    lifted = running.change("PATCH", f"/api/v1/queries/{QUERY}", {"max_rows_per_batch": None})
    assert [c.to_params.max_rows_per_batch for c in lifted.plan.query_changes] == [None]
    wait_until(
        lambda: (v := running.query_view()).status == QueryStatus.RUNNING and v.params.max_rows_per_batch is None,
        120,
        "the query to restart without the rate limit",
    )


def test_every_row_came_out_exactly_once_and_a_restarted_daemon_keeps_the_overrides(running):
    seen = newest(running.query_view().samples)
    wait_until(lambda: batches_since(running.query_view().samples, seen) >= 2, 60, "batches after the last restart")
    running.change("POST", "/api/v1/control/pause", {"note": "before the daemon restart"})
    running.change("PATCH", "/api/v1/control", {"max_executors": 1})
    running.daemon.shutdown()  # stops the query at a batch boundary, then the HTTP server
    running.thread.join(30)
    drain(running.daemon.spark, running.build, QUERY, running.ckpt, 2)
    assert assert_every_row_once(running.out, running.ckpt) > 1000

    # a new daemon process would read the same state file: it resumes paused, with the same bounds
    again = DriverDaemon(running.settings, specs=[running.spec], spark=running.daemon.spark)
    again.start()
    try:
        assert again.reconciler.control.paused and again.reconciler.control.max_executors == 1  # type: ignore[union-attr]
        with httpx.Client(base_url=again.http.url, timeout=30) as client:  # type: ignore[union-attr]
            control = client.get("/api/v1/control").json()
            assert control["overrides"]["paused"] is True and control["effective"]["max_executors"] == 1
        assert again.loop.run_once()  # type: ignore[union-attr]
        assert again.reconciler.last.paused and again.reconciler.last.results == ()  # type: ignore[union-attr]
    finally:
        again.shutdown()
