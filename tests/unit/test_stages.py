"""A running batch's input read from the driver's REST API (``autoscaler.spark.stages``)."""

from types import SimpleNamespace

import pytest

from autoscaler.core.model import RunningRead
from autoscaler.spark.stages import StageInput, running_read


def stage(stage_id, tasks, done, records, attempt=0):
    # the fields of Spark's StageData that the reader uses, as /api/v1/.../stages/{id} serves them
    return {"stageId": stage_id, "attemptId": attempt, "status": "ACTIVE", "numTasks": tasks, "numCompleteTasks": done, "inputRecords": records}


def test_the_stages_that_read_input_give_its_rows_and_their_tasks():
    # a scan stage (4 of 8 tasks done, 11,872 rows: measured on Spark 4.3) and a shuffle stage
    # that reads no input
    read = running_read([stage(3, 8, 4, 11_872), stage(4, 200, 0, 0)])
    assert read == RunningRead(rows=11_872, tasks_done=4, tasks=8)
    assert read.batch_rows() == 23_744


def test_before_a_task_has_finished_there_are_no_rows_yet():
    assert running_read([stage(3, 8, 0, 0), stage(4, 200, 0, 0)]) == RunningRead(0, 0, 208)
    assert running_read([]) is None


def test_a_stage_attempted_again_counts_its_latest_attempt():
    # a fetch failure re-runs the stage: its first attempt's rows are read again by the second
    read = running_read([stage(3, 8, 8, 23_744, attempt=0), stage(3, 8, 2, 5_936, attempt=1)])
    assert read == RunningRead(rows=5_936, tasks_done=2, tasks=8)


def spark_at(url):
    return SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=url, applicationId="app-1"))


def test_the_reader_asks_the_driver_for_each_stage(httpserver):
    httpserver.expect_request("/api/v1/applications/app-1/stages/3", query_string="details=false").respond_with_json([stage(3, 8, 4, 11_872)])
    httpserver.expect_request("/api/v1/applications/app-1/stages/4", query_string="details=false").respond_with_json([stage(4, 200, 0, 0)])
    reader = StageInput(spark_at(httpserver.url_for("").rstrip("/")))
    assert reader.read([3, 4]) == RunningRead(11_872, 4, 8)
    assert reader.read([]) is None


@pytest.mark.parametrize(
    "respond",
    [
        pytest.param(lambda r: r.respond_with_data("stage 3 not found", status=404), id="a-stage-the-store-dropped"),
        pytest.param(lambda r: r.respond_with_data("<html>", content_type="text/html"), id="not-json"),
    ],
)
def test_a_stage_that_cannot_be_read_leaves_the_batch_to_its_duration(httpserver, respond):
    respond(httpserver.expect_request("/api/v1/applications/app-1/stages/3"))
    assert StageInput(spark_at(httpserver.url_for("").rstrip("/"))).read([3]) is None


def test_without_the_ui_there_is_nothing_to_read():
    assert StageInput(spark_at(None)).read([3]) is None


def test_one_read_of_all_the_stages_is_bounded_by_the_timeout(httpserver):
    """A stalled driver delays a tick by at most the timeout per query, not per stage: each stage
    is asked with the time left, and none once it is spent (here each answer seems to take 1.5 s
    of the 2 s)."""
    for stage_id in (3, 4, 5):
        httpserver.expect_request(f"/api/v1/applications/app-1/stages/{stage_id}").respond_with_json([stage(stage_id, 8, 8, 100)])
    ticks = iter([0.0, 0.0, 1.5, 3.0])  # at the start, then before each stage
    reader = StageInput(spark_at(httpserver.url_for("").rstrip("/")), clock=lambda: next(ticks))
    assert reader.read([3, 4, 5]) is None
    assert [r.path.rsplit("/", 1)[1] for r, _ in httpserver.log] == ["3", "4"]
    fast = StageInput(spark_at(httpserver.url_for("").rstrip("/")), clock=lambda: 0.0)
    assert fast.read([3, 4, 5]) == RunningRead(300, 24, 24)
