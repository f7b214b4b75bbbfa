"""The state store's disk fills up, then turns read-only, under a running daemon: ticks go on,
control changes answer 503 with the reason and change nothing, the saved state is not damaged,
and a daemon killed mid-save leaves nothing a restart trips over.

A real tmpfs of 64 KiB in a mount namespace of the test's own (``unshare -rm``, util-linux):
root ignores permission bits, so a read-only or full directory must be a real filesystem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_full_then_read_only_state_disk_keeps_the_daemon_ticking_and_refuses_changes_with_the_reason(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir()
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, "-m", "tests.faults_state", str(directory)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["saved_at_first"] and seen["filled"] == "No space left on device"
    assert seen["ticks_while_full"] == 6 and "No space left on device" in seen["state_error_while_full"]
    assert seen["pause_while_full"][0] == 503 and "No space left on device" in seen["pause_while_full"][1]
    assert seen["paused_while_full"] is False and seen["file_intact_while_full"]
    assert seen["state_error_after_space"] is None and seen["pause_after_space"] == 200 and seen["saved_after_space"] is True
    assert seen["ticks_while_read_only"] == 6 and "Read-only file system" in seen["state_error_while_read_only"]
    assert seen["resume_while_read_only"][0] == 503 and "Read-only file system" in seen["resume_while_read_only"][1]
    assert seen["still_paused"] is True and seen["file_intact_while_read_only"]
    assert seen["restored_paused"] is True and seen["leftovers_after_restart"] == []
