"""A running batch's rows from its checkpoint's offset log (``window.planned_batch_rows``)."""

import threading

import pytest

from autoscaler.spark.checkpoint import open_checkpoint, running_offsets
from autoscaler.spark.planned import PlannedRows, planned_rows
from autoscaler.spark.progress import offsets_count_rows
from tests.checkpoints import MemoryFiles, make_checkpoint


def source(start, end, rows, **more):
    return {"startOffset": start, "endOffset": end, "numInputRows": rows, **more}


@pytest.mark.parametrize(
    "sources, verdict",
    [
        pytest.param([source({"row": 100}, {"row": 600}, 500)], True, id="trace-source-rows"),
        pytest.param([source('{"t":{"0":100,"1":50}}', '{"t":{"0":130,"1":70}}', 50)], True, id="kafka-partitions-summed"),
        pytest.param([source({"logOffset": 3}, {"logOffset": 4}, 1000)], False, id="file-source-counts-files"),
        pytest.param([source(7, 9, 400, description="RateStreamV2[rowsPerSecond=200")], False, id="rate-source-counts-seconds"),
        pytest.param([source({"t": {"0": 100}}, {"t": {"0": 111}}, 10)], False, id="transaction-markers"),
        pytest.param([source({"offset": 10, "timestamp": 5000}, {"offset": 20, "timestamp": 6000}, 10)], False, id="rate-micro-batch"),
        pytest.param([source(None, {"row": 600}, 600)], None, id="first-batch-no-start"),
        pytest.param([source({"t": {"0": 1}}, {"t": {"0": 5, "1": 3}}, 7)], None, id="kafka-partition-added"),
        pytest.param([source({"row": 600}, {"row": 600}, 0)], None, id="no-rows-tells-nothing"),
        pytest.param([source({"row": 0}, {"row": 10}, 10), source({"logOffset": 3}, {"logOffset": 4}, 50)], False, id="one-source-of-two-does-not"),
        pytest.param([source({"logOffset": 3}, {"logOffset": 4}, 50), source(None, {"row": 10}, 10)], False, id="a-mismatch-before-an-unknown"),
        pytest.param([source({"row": 0}, {"row": 10}, 10), source({"row": 5}, {"row": 5}, 0)], True, id="an-idle-second-source"),
    ],
)
def test_a_finished_batch_tells_whether_its_sources_offsets_count_rows(sources, verdict):
    assert offsets_count_rows(sources) is verdict


def test_planned_rows_sum_the_sources_and_refuse_what_does_not_compare():
    assert planned_rows(({"row": 1401}, '{"t":{"0":130,"1":70}}'), ({"row": 1000}, {"t": {"0": 100, "1": 50}})) == 451
    assert planned_rows(({"t": {"0": 5, "1": 3}},), ({"t": {"0": 1}},)) is None  # a partition the previous batch did not have
    assert planned_rows(({"row": 5},), ({"row": 9},)) is None  # went back (a checkpoint rewound)
    assert planned_rows(("-",), ({"row": 9},)) is None
    assert planned_rows(({"row": 5}, {"row": 7}), ({"row": 1},)) is None  # a source more


def test_the_planned_offsets_of_a_batch_are_read_while_it_runs(tmp_path):
    make_checkpoint(tmp_path, [0, 1], [0], sources=('{"row":1401}', "-"))
    files = open_checkpoint(tmp_path)
    assert running_offsets(files, 1) == ({"row": 1401}, "-")
    assert running_offsets(files, 2) is None  # not planned yet
    assert running_offsets(files, 0) is None  # ended: a progress event late does not make it the running one
    remote = MemoryFiles.of("s3a://b/ck", tmp_path)
    assert running_offsets(open_checkpoint("s3a://b/ck", lambda location: remote), 1) == ({"row": 1401}, "-")


def progress(batch, start, end, rows):
    return {"batchId": batch, "sources": [source({"row": start}, {"row": end}, rows)]}


def test_the_running_batch_rows_come_from_its_planned_offsets_once_a_batch_said_offsets_count_rows(tmp_path):
    make_checkpoint(tmp_path, [0, 1, 2, 3], [0, 1, 2], sources=())
    (tmp_path / "offsets" / "3").write_text('v1\n{"conf":{}}\n{"row":9000}\n')
    reader = PlannedRows(tmp_path, None)
    assert reader.running_batch_rows() is None  # no batch finished yet: the start is not known
    reader.on_progress(progress(2, 500, 1000, 500))
    assert reader.running_batch_rows() == 8000  # batch 3: 1000 -> 9000, before any of its tasks ends
    reader.on_progress(progress(3, 1000, 9000, 8000))
    assert reader.running_batch_rows() is None  # batch 4 not planned yet
    (tmp_path / "offsets" / "4").write_text('v1\n{"conf":{}}\n{"row":9100}\n')
    assert reader.running_batch_rows() == 100


def test_offsets_that_once_did_not_count_rows_are_not_read_again(tmp_path):
    make_checkpoint(tmp_path, [0, 1, 2], [0, 1], sources=('{"logOffset":2}',))
    reader = PlannedRows(tmp_path, None)
    reader.on_progress({"batchId": 1, "sources": [source({"logOffset": 1}, {"logOffset": 2}, 700)]})
    assert reader.counts_rows is False and reader.running_batch_rows() is None
    reader.on_progress(progress(2, 0, 10, 10))  # a batch that happens to match does not turn it back on
    assert reader.counts_rows is False


def test_a_stalled_store_delays_a_tick_by_the_timeout_and_its_answer_comes_on_a_later_tick(tmp_path):
    make_checkpoint(tmp_path, [0, 1], [0], sources=('{"row":300}',))
    release = threading.Event()

    class Stalled(MemoryFiles):
        def names(self, folder):
            release.wait(10)
            return super().names(folder)

    store = Stalled.of("s3a://b/ck", tmp_path)
    reader = PlannedRows("s3a://b/ck", lambda location: store, timeout=0.05)
    reader.on_progress(progress(0, 0, 100, 100))
    assert reader.running_batch_rows() is None  # the read still runs
    assert reader.running_batch_rows() is None  # the same read waited on, not a second one started
    release.set()
    reader._read.join(5)
    assert reader.running_batch_rows() == 200


def test_an_unreadable_store_is_as_if_not_reported(tmp_path):
    reader = PlannedRows("s3a://b/ck", lambda location: MemoryFiles(location, failure="AccessDenied"))
    reader.on_progress(progress(0, 0, 100, 100))
    assert reader.running_batch_rows() is None
