"""A short soak on real Spark: rescales of a stateless and a stateful query, each under a fault
of another kind, and not one row lost or duplicated (``benchmark soak``; the 100-rescale run is
in docs/reliability.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def test_rescales_under_every_kind_of_fault_lose_and_duplicate_nothing(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "benchmark", "soak", "--rescales", "3", "--fault-every", "1",
         "--master", "local-cluster[3,1,512]", "--workdir", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    assert result["rescales"] == 3 and result["rows_in"] > 10_000
    assert (result["lost_rows"], result["duplicate_rows"]) == (0, 0) and result["rows_out"] == result["rows_in"]
    assert result["stateful"]["counted_too_often"] == result["stateful"]["counted_too_rarely"] == 0
    assert [f["fault"] for f in result["faults"]] == ["executor_killed", "start_failed", "mid_batch"]
    start_failed = result["faults"][1]
    assert start_failed["first_attempt_ok"] is False and start_failed["went_back_to_old_settings"] and start_failed["second_attempt_ok"]
    assert result["pause_seconds"]["p50"] > 0
