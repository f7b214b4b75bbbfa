import json
from datetime import timedelta

import pytest

from autoscaler.spark.progress import parse_progress, source_backlog, state_partitions

PROGRESS = {
    "id": "q-id",
    "runId": "run-id",
    "name": "clicks",
    "timestamp": "2026-11-22T10:32:21.000Z",
    "batchId": 11,
    "batchDuration": 636,
    "numInputRows": 500,
    "inputRowsPerSecond": 500.5,
    "processedRowsPerSecond": 786.2,
    "durationMs": {"addBatch": 412, "triggerExecution": 636, "walCommit": 65},
    "stateOperators": [{"operatorName": "stateStoreSave", "numShufflePartitions": 4, "numStateStoreInstances": 4}],
    "sources": [{"description": "x", "startOffset": {"row": 5500}, "endOffset": {"row": 6000}, "latestOffset": {"row": 8331}}],
    "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
}


def test_progress_becomes_a_batch_sample():
    s = parse_progress(json.dumps(PROGRESS), cores=2, parallelism=4, cold=False)
    assert (s.batch_id, s.input_rows, s.backlog_rows, s.cores, s.parallelism) == (11, 500, 2331, 2, 4)
    assert s.duration == timedelta(milliseconds=636)
    assert s.fixed_overhead == timedelta(milliseconds=224)  # triggerExecution - addBatch
    assert s.started_at.isoformat() == "2026-11-22T10:32:21+00:00"
    assert state_partitions(PROGRESS) == 4


@pytest.mark.parametrize(
    "source, backlog",
    [
        pytest.param({"endOffset": {"row": 10}, "latestOffset": {"row": 25}}, 15, id="numeric-offsets"),
        pytest.param(
            {"endOffset": '{"t":{"0":100,"1":50}}', "latestOffset": '{"t":{"0":130,"1":70}}'}, 50, id="kafka-offsets-summed"
        ),
        pytest.param(
            {"description": "RateStreamV2[rowsPerSecond=200, rampUpTimeSeconds=0", "endOffset": 7, "latestOffset": 9}, 400, id="rate-source-seconds"
        ),
        pytest.param({"endOffset": {"t": {"0": 1, "1": 2}}, "latestOffset": None, "metrics": {"avgOffsetsBehindLatest": "10.0"}}, 20, id="kafka-metric"),
        pytest.param({"endOffset": {"logOffset": 3}, "latestOffset": {"logOffset": 5}}, None, id="file-source-unknown"),
        pytest.param({"endOffset": {"offset": 36000}, "latestOffset": None}, None, id="rate-micro-batch-unknown"),
        pytest.param({"endOffset": {"row": 30}, "latestOffset": {"row": 25}}, 0, id="never-negative"),
    ],
)
def test_backlog_from_source_offsets(source, backlog):
    assert source_backlog(source) == backlog


def test_unknown_backlog_of_any_source_makes_the_batch_backlog_unknown():
    p = {**PROGRESS, "sources": PROGRESS["sources"] + [{"endOffset": {"logOffset": 3}, "latestOffset": None}]}
    assert parse_progress(p, cores=1, parallelism=1, cold=False).backlog_rows is None
