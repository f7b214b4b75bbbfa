"""The query host's rescale protocol against a stand-in for Spark (no JVM): which progress event
ends a rescale.

Spark delivers listener events asynchronously: the last progress event of a stopped run can
still be queued when the new run starts. It belongs to the old run and must not be taken as the
new run's first batch (an integration run once reported a rescale done with a batch of the old
partitions).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, Callable

import pytest
import structlog

from autoscaler.core.model import QueryChange, QueryStatus, Reason
from autoscaler.runtime.clock import SystemClock
from autoscaler.spark.host import QueryHost
from autoscaler.spark.pipelines import PipelineError, PipelineSpec
from tests.waiting import wait_until


def progress(batch_id: int, run_id: str, timestamp: str, duration_ms: int = 500) -> str:
    return json.dumps(
        {
            "id": "q-id",
            "runId": run_id,
            "name": "q",
            "timestamp": timestamp,
            "batchId": batch_id,
            "batchDuration": duration_ms,
            "numInputRows": 100,
            "inputRowsPerSecond": 100.0,
            "processedRowsPerSecond": 200.0,
            "durationMs": {"addBatch": duration_ms - 100, "triggerExecution": duration_ms},
            "sources": [{"description": "x", "startOffset": {"row": 0}, "endOffset": {"row": 100}, "latestOffset": {"row": 100}}],
            "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
        }
    )


class FakeQuery:
    def __init__(self, run_id: str) -> None:
        self.runId = run_id
        self.id = "q-id"
        self.name = "q"
        self.isActive = True
        self.status = {"isTriggerActive": False}  # between batches: stopped at once

    def stop(self) -> None:
        self.isActive = False

    def exception(self) -> None:
        return None


class FakeWriter:
    def __init__(self, on_start: Callable[[], None]) -> None:
        self.on_start = on_start

    def queryName(self, name: str) -> FakeWriter:
        return self

    def option(self, key: str, value: Any) -> FakeWriter:
        return self

    def trigger(self, **kw: Any) -> FakeWriter:
        self.triggers = getattr(self, "triggers", []) + [kw]
        return self

    def start(self) -> FakeQuery:
        return self.on_start()  # type: ignore[func-returns-value]


class FakeSpark:
    class _Conf(dict):
        def set(self, key: str, value: str) -> None:
            self[key] = value

    class _Streams:
        def addListener(self, listener: Any) -> None:
            pass

    def __init__(self) -> None:
        self.conf = self._Conf({"spark.sql.shuffle.partitions": "200"})
        self.streams = self._Streams()


def join_rescales() -> None:
    """Wait for the host's rescale threads to end (each stops and starts a query of the test's)."""
    for t in list(threading.enumerate()):
        if t.name.startswith("rescale-"):
            t.join(5)


def test_a_late_event_of_the_stopped_run_does_not_end_the_rescale(tmp_path):
    starts: list[FakeQuery] = []
    host: QueryHost

    def start() -> FakeQuery:
        if starts:
            # the stopped run's last progress event, still on the listener bus, arrives while
            # the new run starts
            host.on_progress(progress(7, starts[-1].runId, "2026-11-23T10:00:10.000Z"), "q", starts[-1].runId)
        starts.append(FakeQuery(f"run-{len(starts)}"))
        return starts[-1]

    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(start), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    try:
        old = host.views()[0].params
        change = QueryChange("q", old, replace(old, parallelism=4), Reason.OPERATOR_REQUEST, "2 -> 4")
        assert host.rescale(change, SystemClock().now())
        wait_until(lambda: len(starts) == 2 and host.views()[0].status == QueryStatus.RUNNING, 10, "the new run", interval=0.01)
        assert host.take_outcomes() == ()  # the old run's batch did not end the rescale
        host.on_progress(progress(8, "run-1", "2026-11-23T10:00:12.000Z"), "q", "run-1")
        [outcome] = host.take_outcomes()
        assert outcome.ok and outcome.to_params.parallelism == 4
        view = host.views()[0]
        assert [(s.batch_id, s.parallelism) for s in view.samples] == [(7, 2), (8, 4)]
    finally:
        join_rescales()
        host._stop_supervisor.set()


def test_idle_events_reach_the_view_and_outlive_a_restart(tmp_path):
    starts: list[FakeQuery] = []

    def start() -> FakeQuery:
        starts.append(FakeQuery(f"run-{len(starts)}"))
        return starts[-1]

    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(start), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    try:
        host.on_progress(progress(7, "run-0", "2026-11-23T10:00:10.000Z"), "q", "run-0")
        host.on_idle("run-0", "2026-11-23T10:00:30.000Z")
        host.on_idle("someone-else", "2026-11-23T10:00:50.000Z")  # another query's run
        view = host.views()[0]
        assert view.idle_at is not None and view.idle_at.isoformat() == "2026-11-23T10:00:30+00:00" and view.idle
        # the source had no rows then, whichever run asked: a restart keeps it (its first quiet
        # trigger reports nothing)
        old = view.params
        assert host.rescale(QueryChange("q", old, replace(old, parallelism=4), Reason.OPERATOR_REQUEST, "2 -> 4"), SystemClock().now())
        wait_until(lambda: len(starts) == 2, 10, "the new run", interval=0.01)
        assert host.views()[0].idle_at == view.idle_at
        host.on_progress(progress(8, "run-1", "2026-11-23T10:00:40.000Z"), "q", "run-1")
        assert not host.views()[0].idle  # a batch after the idle report
    finally:
        join_rescales()
        host._stop_supervisor.set()


def test_a_restarted_daemon_starts_each_query_as_it_last_ran(tmp_path):
    from autoscaler.core.model import QueryParams
    from autoscaler.core.plan import QueryResume

    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(lambda: FakeQuery("run-0")), trigger=timedelta(seconds=2), initial_parallelism=2,
                        max_parallelism=16)
    declared = spec.initial_params(1)
    saved = {"q": QueryResume(replace(declared, parallelism=8, max_rows_per_batch=500), declared)}
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.prepare(2, saved)
    view = host.views()[0]
    assert view.params == QueryParams(parallelism=8, trigger_interval=timedelta(seconds=2), max_rows_per_batch=500)
    assert view.declared == declared


def test_an_available_now_pipeline_is_seen_bounded_and_started_with_available_now(tmp_path):
    # the core refuses a trigger interval for a bounded query (it would be taken, then ignored:
    # the host starts such a pipeline with availableNow whatever the interval)
    writers: list[FakeWriter] = []

    def build(spark: Any, ctx: Any) -> FakeWriter:
        writers.append(FakeWriter(lambda: FakeQuery("run-0")))
        return writers[-1]

    specs = [
        PipelineSpec("b", build, trigger=None, available_now=True, initial_parallelism=2),
        PipelineSpec("s", lambda spark, ctx: FakeWriter(lambda: FakeQuery("run-s")), trigger=timedelta(seconds=1), initial_parallelism=2),
    ]
    host = QueryHost(FakeSpark(), specs, checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    try:
        views = {v.name: v for v in host.views()}
        assert (views["b"].bounded, views["s"].bounded) == (True, False)
        assert views["b"].params.trigger_interval is None and writers[0].triggers == [{"availableNow": True}]
    finally:
        host._stop_supervisor.set()


class _Dead(FakeQuery):
    """A run that has already failed."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.isActive = False

    def exception(self) -> Any:  # type: ignore[override]
        return RuntimeError("the sink rejected the batch")


def test_a_query_that_keeps_failing_is_restarted_with_growing_back_off_then_given_up(tmp_path):
    from autoscaler.core.model import OutcomeKind
    from autoscaler.runtime.clock import FakeClock

    clock = FakeClock()
    runs = iter(range(100))
    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(lambda: _Dead(f"run-{next(runs)}")), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=clock, registered_cores=lambda: 2, max_failures=4,
                     restart_backoff_max=timedelta(seconds=5))
    host.start_all()
    host._stop_supervisor.set()  # the test drives supervision itself, on its clock
    waits = []
    for _ in range(60):
        host.supervise_once()
        view = host.views()[0]
        if view.status == QueryStatus.FAILED:
            break
        run = host._runs["q"]
        if view.status == QueryStatus.RESTARTING and run.next_restart_at is not None:
            waits.append((run.next_restart_at - clock.now()).total_seconds())
            clock.advance(run.next_restart_at - clock.now())
    assert view.status == QueryStatus.FAILED and view.restarts == 3 and "the sink rejected the batch" in view.last_error
    assert waits == [2.0, 4.0, 5.0]  # doubling, capped by restart_backoff_max
    outcomes = host.take_outcomes()
    assert [(o.kind, o.ok) for o in outcomes] == [(OutcomeKind.RESTART, True)] * 3 + [(OutcomeKind.RESTART, False)]
    assert outcomes[-1].message.startswith("given up after 4 failures in a row: the sink rejected the batch")
    host.supervise_once()
    assert host.views()[0].status == QueryStatus.FAILED  # no more restarts


@pytest.mark.parametrize(
    "error, summary",
    [
        pytest.param(
            "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/x/clientserver.py", line 644, in _call_proxy\n    return_value = call(*params)\n'
            '  File "/x/p.py", line 3, in sink\n    raise RuntimeError("the warehouse rejected batch 4")\n'
            "RuntimeError: the warehouse rejected batch 4\n\n=== Streaming Query ===\nIdentifier: [id = 1]",
            "RuntimeError: the warehouse rejected batch 4",
            id="foreachBatch-error: the Python exception line first",
        ),
        pytest.param("[STREAM_FAILED] Query [id = 1] terminated with exception: Connection refused", None, id="other-error: as it is"),
    ],
)
def test_a_failed_querys_error_leads_with_what_was_raised(error, summary):
    from autoscaler.spark.host import error_summary

    assert error_summary(error) == (summary or error)


def checkpoint(root, planned: int, committed: int) -> None:
    for folder, last in (("offsets", planned), ("commits", committed)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for n in range(last + 1):
            (root / folder / str(n)).write_text('v1\n{}\n{"row": 5}\n')


@pytest.mark.parametrize(
    "batches_done, jvm_reported, report",
    [
        pytest.param(3, False, "query q stopped at a batch boundary (batch 5 committed: the stop cut it short and it was run to its end)",
                     id="progressing: the cut batch is run to its end"),
        pytest.param(0, True, "query q stopped at a batch boundary (batch 5 committed: the stop cut it short and it was run to its end)",
                     id="progressing by the JVM's record, its events not come yet: the same"),
        pytest.param(0, False, "query q stopped (batch 4 committed; batch 5 is not, and is replayed at the next start)",
                     id="no batch done in this run (failing): left to replay"),
    ],
)
def test_a_stop_that_cuts_a_batch_short_runs_it_to_its_end_before_exiting(tmp_path, batches_done, jvm_reported, report):
    ckpt = tmp_path / "q"
    writers: list[FakeWriter] = []

    def start() -> FakeQuery:
        query = FakeQuery(f"run-{len(writers) - 1}")
        query.lastProgress = {"batchId": 4, "timestamp": "2026-11-23T10:00:04.000Z"} if jvm_reported else None  # type: ignore[attr-defined]
        if {"once": True} in writers[-1].triggers:  # the one-batch replay commits the planned batch
            (ckpt / "commits" / "5").write_text("v1\n{}\n")
            query.isActive = False
            query.awaitTermination = lambda timeout: True  # type: ignore[attr-defined]
        return query

    def build(spark: Any, ctx: Any) -> FakeWriter:
        writers.append(FakeWriter(start))
        return writers[-1]

    spec = PipelineSpec("q", build, trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    for n in range(batches_done):
        host.on_progress(progress(n, "run-0", f"2026-11-23T10:00:0{n}.000Z"), "q", "run-0")
    checkpoint(ckpt, planned=5, committed=4)  # batches back to back: the next one planned before the stop
    [stopped] = host.stop_all()
    assert stopped.describe() == report


class RunningBatch(FakeQuery):
    """A query whose batch 1 runs at the stop: the JVM's last progress is batch 0's until it ends."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.status = {"isTriggerActive": True}
        self.lastProgress: dict | None = {"batchId": 0, "timestamp": "2026-11-23T10:00:00.000Z"}
        self.stopped_at: float | None = None

    def end_batch(self) -> None:
        self.lastProgress = {"batchId": 1, "timestamp": "2026-11-23T10:00:02.000Z"}
        self.status = {"isTriggerActive": False}

    def stop(self) -> None:
        self.stopped_at = time.monotonic()
        super().stop()


def test_a_stop_waits_for_the_running_batch_not_for_a_late_event_of_the_one_before(tmp_path):
    # the listener's events arrive 0.1-1 s after the commit: batch 0's came after the stop began,
    # and the stop took it for the end of the running batch 1 and cut it (the demo stopped by
    # Ctrl-C just after batch 0 committed: "batch 1 is not, and is replayed at the next start")
    query = RunningBatch("run-0")
    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(lambda: query), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    started = time.monotonic()
    late_event = threading.Timer(0.2, lambda: host.on_progress(progress(0, "run-0", "2026-11-23T10:00:00.000Z"), "q", "run-0"))
    batch_ends = threading.Timer(1.0, query.end_batch)
    late_event.start()
    batch_ends.start()
    try:
        host.stop_all(finish_cut_batches=False)
    finally:
        late_event.join()
        batch_ends.join()
    assert query.stopped_at is not None and query.stopped_at - started >= 1.0, "stopped before the running batch ended"


@pytest.mark.parametrize("last_batch_ms, waits", [pytest.param(500, True, id="a gap between batches: waits"),
                                                    pytest.param(1000, False, id="back to back: stops at once")])
def test_a_stop_waits_for_the_running_batch_only_when_batches_leave_a_gap(tmp_path, last_batch_ms, waits):
    # back to back, the batch after the running one is planned as it commits and the stop cuts
    # that one: waiting for the running batch cost its rest and then a whole batch's replay
    query = RunningBatch("run-0")
    spec = PipelineSpec("q", lambda spark, ctx: FakeWriter(lambda: query), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    host.on_progress(progress(0, "run-0", "2026-11-23T10:00:00.000Z", duration_ms=last_batch_ms), "q", "run-0")
    started = time.monotonic()
    batch_ends = threading.Timer(1.0, query.end_batch)
    batch_ends.start()
    try:
        host.stop_all(finish_cut_batches=False)
    finally:
        batch_ends.join()
    assert query.stopped_at is not None
    assert (query.stopped_at - started >= 1.0) == waits, query.stopped_at - started


def test_only_a_pipeline_that_lets_the_daemon_manage_its_rate_limit_gets_one(tmp_path):
    # the daemon cannot know whether a builder passes ctx.max_rows_per_batch to its source: the
    # pipeline says so (manage_rate_limit), and a limit of its own is left alone
    def spec(name: str, **kw: Any) -> PipelineSpec:
        return PipelineSpec(name, lambda spark, ctx: FakeWriter(lambda: FakeQuery(f"run-{name}")), trigger=timedelta(seconds=1), **kw)

    specs = [spec("managed", manage_rate_limit=True), spec("own-limit", manage_rate_limit=True, max_rows_per_batch=500), spec("plain")]
    host = QueryHost(FakeSpark(), specs, checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.start_all()
    try:
        assert {v.name: v.managed_rate_limit for v in host.views()} == {"managed": True, "own-limit": False, "plain": False}
    finally:
        host._stop_supervisor.set()


def test_the_host_refuses_two_pipelines_on_one_checkpoint_before_it_listens(tmp_path):
    # attach() hands its specs straight to the host: a's checkpoint= (spelled with a slash) was b's default, and both ran on it
    spark = FakeSpark()
    listeners: list[Any] = []
    spark.streams.addListener = listeners.append  # type: ignore[method-assign]
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=f"{tmp_path}/b/"), PipelineSpec("b", lambda s, c: None)]
    with pytest.raises(PipelineError, match=re.escape(f"a, b share the checkpoint {str(tmp_path / 'b')!r} (b's by default")):
        QueryHost(spark, specs, checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    assert listeners == []


def test_a_default_checkpoint_under_a_uri_root_is_handed_to_spark_as_the_uri(tmp_path, monkeypatch):
    # the host resolved its root as a local path: s3a://bucket/ck became <cwd>/s3a:/bucket/ck, and each
    # default checkpoint was on the driver pod's disk, lost with the pod
    monkeypatch.chdir(tmp_path)
    seen: list[tuple[str, Any]] = []

    class Writer(FakeWriter):
        def option(self, key: str, value: Any) -> FakeWriter:
            seen.append((key, value))
            return self

    def build(spark: Any, ctx: Any) -> FakeWriter:
        seen.append(("context", ctx.checkpoint_location))
        return Writer(lambda: FakeQuery("run-0"))

    from tests.checkpoints import MemoryFiles

    def remote(location: str) -> MemoryFiles:
        seen.append(("read", location))
        return MemoryFiles(location)  # no checkpoint there yet

    spec = PipelineSpec("q", build, trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root="s3a://bucket/ck", clock=SystemClock(), registered_cores=lambda: 2,
                     remote_checkpoints=remote)
    host.prepare(2)
    host.start_all()
    host._stop_supervisor.set()
    assert [s for s in seen if s[0] != "read"] == [
        ("context", "s3a://bucket/ck/q"), ("context", "s3a://bucket/ck/q"), ("checkpointLocation", "s3a://bucket/ck/q")
    ]
    assert {s for s in seen if s[0] == "read"} == {("read", "s3a://bucket/ck/q")}  # read where Spark writes it
    assert list(tmp_path.iterdir()) == []


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def remote_checkpoint(tmp_path, planned: int, committed: int, conf: dict[str, str]) -> Any:
    """A stateful query's checkpoint on remote storage (s3a://bucket/ck/q), as a remote file system reads it."""
    from tests.checkpoints import MemoryFiles, make_checkpoint

    make_checkpoint(tmp_path / "remote", range(planned + 1), range(committed + 1), conf, state=True)
    (tmp_path / "remote" / "state" / "0" / "0").mkdir()
    (tmp_path / "remote" / "state" / "0" / "0" / "1.changelog").write_text("x")
    return MemoryFiles.of("s3a://bucket/ck/q", tmp_path / "remote")


def test_a_query_on_remote_storage_runs_and_stops_as_its_checkpoint_pins(tmp_path, monkeypatch):
    # its checkpoint read as missing: the spec's 8 shuffle partitions were taken for the query's
    # (Spark runs the 4 the checkpoint pins), the RocksDB store for an hdfs one, and the stop
    # reported "no batch committed yet"
    monkeypatch.chdir(tmp_path)
    remote = remote_checkpoint(tmp_path, planned=2, committed=1, conf={"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.stateStore.providerClass": ROCKSDB})
    opened: list[str] = []

    def files(location: str) -> Any:
        opened.append(location)
        return remote

    spark = FakeSpark()
    shuffle_at_start: list[str] = []

    def start() -> FakeQuery:
        shuffle_at_start.append(spark.conf["spark.sql.shuffle.partitions"])
        return FakeQuery("run-0")

    spec = PipelineSpec("q", lambda s, ctx: FakeWriter(start), trigger=timedelta(seconds=1), initial_parallelism=2, shuffle_partitions=8)
    host = QueryHost(spark, [spec], checkpoint_root="s3a://bucket/ck", clock=SystemClock(), registered_cores=lambda: 2, remote_checkpoints=files)
    host.prepare(2)
    view = host.views()[0]
    assert (view.params.shuffle_partitions, view.stateful, view.state_store) == (4, True, "rocksdb")
    host.start_all()
    host._stop_supervisor.set()
    assert shuffle_at_start == ["4"]
    [stopped] = host.stop_all(finish_cut_batches=False)
    assert stopped.describe() == "query q stopped (batch 1 committed; batch 2 is not, and is replayed at the next start)"
    assert set(opened) == {"s3a://bucket/ck/q"} and list(tmp_path.iterdir()) == [tmp_path / "remote"]  # nothing on the local disk


def test_a_remote_checkpoint_that_cannot_be_read_is_reported_with_the_reason_never_as_missing(tmp_path, restore_logging):
    # an unreadable checkpoint read as missing: the query started with the spec's shuffle partitions,
    # the stop reported "no batch committed yet"
    from autoscaler.core.plan import refusal_for

    remote = remote_checkpoint(tmp_path, planned=1, committed=1, conf={"spark.sql.shuffle.partitions": "4"})
    denied = "java.nio.file.AccessDeniedException: s3a://bucket/ck/q: getFileStatus on ck/q: 403 Forbidden"
    remote.failure = denied
    spec = PipelineSpec("q", lambda s, ctx: FakeWriter(lambda: FakeQuery("run-0")), trigger=timedelta(seconds=1), initial_parallelism=2,
                        shuffle_partitions=8)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root="s3a://bucket/ck", clock=SystemClock(), registered_cores=lambda: 2,
                     remote_checkpoints=lambda location: remote)
    with pytest.raises(PipelineError, match=re.escape(f"pipeline 'q': checkpoint s3a://bucket/ck/q could not be read: {denied}")):
        host.prepare(2)
    remote.failure, remote.files = None, {}  # reachable again, and a new query: no checkpoint yet
    host.prepare(2)
    host.start_all()
    host._stop_supervisor.set()
    remote.failure = denied
    # its first batch shows state: the store is not read, so unknown (not "hdfs"), and a shuffle change is refused
    data = json.loads(progress(2, "run-0", "2026-11-23T10:00:10.000Z"))
    data["stateOperators"] = [{"operatorName": "stateStoreSave", "numRowsTotal": 5, "numShufflePartitions": 4}]
    host.on_progress(json.dumps(data), "q", "run-0")
    view = host.views()[0]
    assert (view.stateful, view.state_store, view.params.shuffle_partitions) == (True, None, 4)
    refusal = refusal_for(view, replace(view.params, shuffle_partitions=8))
    assert refusal is not None and refusal[0] == Reason.STATE_PINS_SHUFFLE_PARTITIONS and "(unknown state store)" in refusal[1]
    structlog.reset_defaults()  # every level reaches the capture, whatever an earlier test configured
    with structlog.testing.capture_logs() as logs:
        [stopped] = host.stop_all()
    # logged as a warning naming why, not as "last_committed_batch=None" at info
    [logged] = [e for e in logs if e["event"] == "query_stopped"]
    assert logged["log_level"] == "warning" and denied in logged["checkpoint_unreadable"] and "last_committed_batch" not in logged
    assert stopped.last_committed is None
    assert stopped.describe() == f"query q stopped (which batch is committed is unknown: checkpoint s3a://bucket/ck/q could not be read: {denied})"


def test_a_remote_checkpoint_unreadable_for_many_batches_is_warned_once_and_its_return_once(tmp_path, restore_logging):
    # it was read again and warned at every batch: an hour's outage of the storage, at a batch
    # every few seconds, filled the log with the same warning
    structlog.reset_defaults()  # every level reaches the capture, whatever an earlier test configured
    host, remote = running_without_its_state_store(tmp_path)

    def batch(batch_id: int) -> None:
        stateful_batch(host, batch_id)
        read = host._runs["q"].state_store_read
        assert read is not None
        read.join(timeout=10)  # each batch's read ends before the next: one read after each

    remote.failure = "java.net.SocketTimeoutException: connect timed out"
    with structlog.testing.capture_logs() as logs:
        for batch_id in range(2, 7):
            batch(batch_id)
        assert host.views()[0].state_store is None  # still unknown: a shuffle change is refused
        remote.failure = None
        batch(7)
        batch(8)
    events = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("checkpoint_")]
    assert events == [("checkpoint_unreadable", "warning"), ("checkpoint_readable_again", "info")]
    assert "connect timed out" in next(e["error"] for e in logs if e["event"] == "checkpoint_unreadable")
    assert host.views()[0].state_store == "rocksdb"
    host.stop_all(finish_cut_batches=False)


def test_a_checkpoint_read_that_hangs_delays_no_progress_event_and_runs_once_at_a_time(tmp_path):
    # the read ran on the listener thread, which delivers every query's progress: an S3 outage,
    # each call retried with back-off for minutes, held every query's next progress that long
    host, remote = running_without_its_state_store(tmp_path)
    storage_back, reads = threading.Event(), []

    def hanging(location: str) -> Any:
        reads.append(location)
        storage_back.wait(timeout=30)
        return remote

    host._remote_checkpoints = hanging  # the storage hangs from now on

    try:
        for batch_id in range(2, 6):
            stateful_batch(host, batch_id)  # each returns while the read hangs
        assert host._runs["q"].progress_count == 4 and not storage_back.is_set()
        wait_until(lambda: reads, 10, "the read to start", interval=0.01)
        assert reads == ["s3a://bucket/ck/q"]  # one read at a time, not one more per batch
        view = host.views()[0]
        assert (view.stateful, view.state_store) == (True, None)  # unknown meanwhile: a shuffle change is refused
    finally:
        storage_back.set()
    wait_until(lambda: host.views()[0].state_store == "rocksdb", 10, "the read to end", interval=0.01)
    host.stop_all(finish_cut_batches=False)


def test_an_unexpected_error_of_the_checkpoint_read_is_logged_with_its_type_and_read_again(tmp_path, restore_logging):
    # on its own thread, an error other than the storage's would end the thread unseen
    structlog.reset_defaults()  # every level reaches the capture, whatever an earlier test configured
    host, remote = running_without_its_state_store(tmp_path)

    def broken(location: str) -> Any:
        raise KeyError("offsets/1")

    host._remote_checkpoints = broken
    with structlog.testing.capture_logs() as logs:
        stateful_batch(host, 2)
        wait_until(lambda: any(e["event"] == "checkpoint_read_failed" for e in logs), 10, "the error logged", interval=0.01)
    [failed] = [e for e in logs if e["event"] == "checkpoint_read_failed"]
    assert (failed["log_level"], failed["query"], failed["error"]) == ("warning", "q", "KeyError: 'offsets/1'")
    assert host.views()[0].state_store is None
    host._remote_checkpoints = lambda location: remote
    stateful_batch(host, 3)  # read again after a later batch
    wait_until(lambda: host.views()[0].state_store == "rocksdb", 10, "the read after the next batch", interval=0.01)
    host.stop_all(finish_cut_batches=False)


def running_without_its_state_store(tmp_path) -> tuple[QueryHost, Any]:
    """A host running the stateful query q on a RocksDB checkpoint on remote storage, as after a
    start that could not read which state store it pins; and that storage."""
    remote = remote_checkpoint(tmp_path, planned=1, committed=1, conf={"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.stateStore.providerClass": ROCKSDB})
    spec = PipelineSpec("q", lambda s, ctx: FakeWriter(lambda: FakeQuery("run-0")), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root="s3a://bucket/ck", clock=SystemClock(), registered_cores=lambda: 2,
                     remote_checkpoints=lambda location: remote)
    host.prepare(2)
    host.start_all()
    host._stop_supervisor.set()
    host._runs["q"].state_store = None
    return host, remote


def stateful_batch(host: QueryHost, batch_id: int) -> None:
    """The progress event of batch ``batch_id`` of run-0 of the stateful query q."""
    data = json.loads(progress(batch_id, "run-0", f"2026-11-23T10:00:{10 + batch_id:02d}.000Z"))
    data["stateOperators"] = [{"operatorName": "stateStoreSave", "numRowsTotal": 5, "numShufflePartitions": 4}]
    host.on_progress(json.dumps(data), "q", "run-0")


@pytest.mark.parametrize("delete_fails", [False, True], ids=["removed", "cannot-be-removed"])
def test_a_failed_repartition_on_remote_storage_leaves_no_dangling_offsets_or_says_why(tmp_path, delete_fails):
    # remove_offsets_after removed nothing on remote storage: the offsets/2 the failed repartition
    # planned stayed, and every later start failed with STREAMING_UNFINISHED_REPARTITION_DETECTED
    remote = remote_checkpoint(tmp_path, planned=1, committed=1, conf={"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.stateStore.providerClass": ROCKSDB})
    starts: list[FakeQuery] = []

    def start() -> FakeQuery:
        query = FakeQuery(f"run-{len(starts)}")
        query.awaitTermination = lambda timeout: True  # type: ignore[attr-defined]
        starts.append(query)
        return query

    class Manager:
        def repartition(self, checkpoint: str, partitions: int) -> None:
            assert checkpoint == "s3a://bucket/ck/q"
            remote.files["offsets/2"] = remote.files["offsets/1"]  # planned, then the repartition fails
            if delete_fails:
                remote.failure = "java.io.InterruptedIOException: getFileStatus on ck/q/offsets/2: timed out"
            raise RuntimeError("STATE_REPARTITION_FAILED")

    spark = FakeSpark()
    spark._streamingCheckpointManager = Manager()  # type: ignore[attr-defined]
    spec = PipelineSpec("q", lambda s, ctx: FakeWriter(start), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(spark, [spec], checkpoint_root="s3a://bucket/ck", clock=SystemClock(), registered_cores=lambda: 2,
                     remote_checkpoints=lambda location: remote)
    host.prepare(2)
    host.start_all()
    host._stop_supervisor.set()
    old = host.views()[0].params
    assert host.rescale(QueryChange("q", old, replace(old, shuffle_partitions=8), Reason.OPERATOR_REQUEST, "4 -> 8"), SystemClock().now())
    outcomes: list[Any] = []

    def outcome_taken() -> bool:
        outcomes.extend(host.take_outcomes())
        return bool(outcomes)

    wait_until(outcome_taken, 10, "the rescale's outcome", interval=0.01)
    join_rescales()
    [outcome] = outcomes
    assert not outcome.ok
    if delete_fails:
        assert outcome.message == (
            "repartition of 'q' failed (RuntimeError: STATE_REPARTITION_FAILED) and the batches it planned after 1 could not be removed, "
            "so the next start fails with STREAMING_UNFINISHED_REPARTITION_DETECTED until they are: checkpoint s3a://bucket/ck/q could not be "
            "read: java.io.InterruptedIOException: getFileStatus on ck/q/offsets/2: timed out"
        )
        assert "offsets/2" in remote.files
    else:
        assert outcome.message == "STATE_REPARTITION_FAILED"
        assert remote.names("offsets") == [".0.crc", ".1.crc", "0", "1"]


def test_a_stateful_shuffle_change_the_state_store_refuses_is_refused_before_the_query_stops(tmp_path):
    # the store was checked after the stop: a refused change stopped the query and restarted it
    # on its old settings (a pause for nothing); now it runs on, untouched
    from tests.checkpoints import make_checkpoint

    make_checkpoint(tmp_path / "q", range(2), range(2), {"spark.sql.shuffle.partitions": "4"}, state=True)  # the default (hdfs) store
    starts: list[FakeQuery] = []

    def start() -> FakeQuery:
        starts.append(FakeQuery(f"run-{len(starts)}"))
        return starts[-1]

    spec = PipelineSpec("q", lambda s, ctx: FakeWriter(start), trigger=timedelta(seconds=1), initial_parallelism=2)
    host = QueryHost(FakeSpark(), [spec], checkpoint_root=tmp_path, clock=SystemClock(), registered_cores=lambda: 2)
    host.prepare(2)
    host.start_all()
    host._stop_supervisor.set()
    old = host.views()[0].params
    assert host.rescale(QueryChange("q", old, replace(old, shuffle_partitions=8), Reason.OPERATOR_REQUEST, "4 -> 8"), SystemClock().now())
    join_rescales()
    [outcome] = host.take_outcomes()
    assert not outcome.ok
    assert outcome.message == "refusing to change shuffle partitions of stateful query 'q': its hdfs state store cannot be repartitioned"
    assert len(starts) == 1 and starts[0].isActive, "the query was stopped (and started again) for a refused change"
    assert host.views()[0].status == QueryStatus.RUNNING and host.views()[0].params == old
