"""Integration tests on real Spark: local clusters on loopback, checkpoints in tmp_path.

Each module shares one session (a session takes 15-30 s to start on 2 cores); every test
stops its queries. Marked ``spark``; run only these with ``pytest -m spark``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Iterator

import pytest

from autoscaler.core.evaluate import batches_since  # noqa: F401 - the tests' names
from autoscaler.core.evaluate import newest_start as newest  # noqa: F401 - the tests' names
from tests.waiting import wait_until  # noqa: F401 - the tests' name

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

def rows_consumed(checkpoint: Any) -> int:
    """Rows Spark consumed from the demo's trace source, from the checkpoint's last end offset:
    the output expected of the sink, taken from Spark's records rather than from the sink under
    test (whose own highest id would hide rows missing at the end)."""
    from autoscaler.spark.checkpoint import read_checkpoint

    info = read_checkpoint(checkpoint)
    assert info.clean, f"{checkpoint}: batch {info.last_offset} was planned but never committed"
    [offset] = info.source_offsets
    return int(offset["row"])


def assert_every_row_once(out: Any, checkpoint: Any) -> int:
    """Every row Spark consumed came out of the sink exactly once, and no other row; returns the rows."""
    from autoscaler.tools.demo.workload import verify_output

    expected = rows_consumed(checkpoint)
    check = verify_output(out, expected)
    assert (check.lost_rows, check.duplicate_rows, check.consistent, check.distinct_rows) == (0, 0, True, expected), (expected, check)
    return expected


def session(master: str, **conf: str) -> Any:
    from autoscaler.core.settings import SparkSettings
    from autoscaler.spark.session import build_session

    return build_session(SparkSettings(master=master, app_name="spark-autoscaler-test", conf={"spark.executor.cores": "1", **conf}))


@pytest.fixture(scope="module")
def spark_session_factory() -> Iterator[Callable[..., Any]]:
    created: list[Any] = []

    def make(master: str, **conf: str) -> Any:
        spark = session(master, **conf)
        created.append(spark)
        return spark

    yield make
    from autoscaler.spark.session import stop_session

    for spark in created:
        stop_session(spark)


def json_lines(text: str) -> list[dict]:
    """The JSON log lines of a daemon's output (other lines, Spark's or a traceback's, left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def trail(records: list[Any], last: int = 40) -> str:
    """The latest ticks, one line each, for a failure message that explains itself."""
    lines = []
    for r in records[-last:]:
        load = r.loads[0] if r.loads else None
        lines.append(
            f"{r.at.time()} alive={r.executors_alive} req={r.executors_requested} proposed={r.decision.proposed} "
            f"target={r.decision.target} {r.decision.reason.value} idle={load and load.idle} rate={load and load.input_rate} "
            f"lag={load and load.lag} | {r.proposal.message[:160]}"
        )
    return "\n".join(lines)
