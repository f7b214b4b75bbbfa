"""Run inside ``unshare -rm`` (a user and mount namespace of its own) by tests/unit/test_state_faults.py:
a daemon (fake cluster, real reconciler, real HTTP API) keeps its state on a 64 KiB tmpfs that
fills up and then turns read-only. Prints what it saw, one JSON document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autoscaler.runtime.state import FileStateStore
from autoscaler.runtime.state.base import decode_state
from tests.harness import build, serve


def main(directory: Path) -> dict:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)], check=True)
    path = directory / "state.json"
    seen: dict = {}
    d = build(state_store=FileStateStore(path))
    for _ in serve(d):
        d.run_for(30, rate=400)
        saved = path.read_text()
        seen["saved_at_first"] = bool(decode_state(saved, "state"))
        (directory / ".state.json.abcd1234.tmp").write_text("{half a save")  # a save killed half-way
        # the disk fills up
        filler = directory / "filler"
        with filler.open("wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 1024)
            except OSError as exc:
                seen["filled"] = exc.strerror
        records = d.run_for(30, rate=2500)  # the load changes: there is new state to save
        seen["ticks_while_full"] = len(records)
        seen["state_error_while_full"] = d.reconciler.state_error
        r = d.client.post("/api/v1/control/pause", headers=d.auth_header)
        seen["pause_while_full"] = [r.status_code, r.json()["detail"][0]["msg"]]
        seen["paused_while_full"] = d.reconciler.control.paused
        seen["file_intact_while_full"] = path.read_text() == saved
        # space again
        filler.unlink()
        d.run_for(10, rate=2500)
        seen["state_error_after_space"] = d.reconciler.state_error
        seen["pause_after_space"] = d.client.post("/api/v1/control/pause", headers=d.auth_header).status_code
        saved = path.read_text()
        seen["saved_after_space"] = decode_state(saved, "state")["control"]["paused"]
        # read-only
        subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        records = d.run_for(30, rate=400)
        seen["ticks_while_read_only"] = len(records)
        seen["state_error_while_read_only"] = d.reconciler.state_error
        r = d.client.post("/api/v1/control/resume", headers=d.auth_header)
        seen["resume_while_read_only"] = [r.status_code, r.json()["detail"][0]["msg"]]
        seen["still_paused"] = d.reconciler.control.paused
        seen["file_intact_while_read_only"] = path.read_text() == saved
        # writable again: a new daemon on the same state removes the half-done save and restores the pause
        subprocess.run(["mount", "-o", "remount,rw", str(directory)], check=True)
        again = build(state_store=FileStateStore(path))
        seen["restored_paused"] = again.reconciler.control.paused
        seen["leftovers_after_restart"] = sorted(p.name for p in directory.iterdir() if p.name.startswith("."))
    return seen


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
