"""How fast the simulator runs a policy, and whether a change moved any decision.

``spark-autoscaler benchmark sim-speed`` measures three things about :func:`~autoscaler.tools.sim.runner.simulate`:

* **wall time per tick**: the loop's ``wall_seconds`` over the ticks, the fastest and the median
  of a few runs, and what that makes for 30 days at a 10-second tick (259,200 ticks). On a
  shared 2-core machine the same run varies by a third or more from hour to hour;
* **instructions per tick** (``--instructions``): the program runs under valgrind's callgrind
  with instrumentation off until the tick ``warm_days`` in, then counts the instructions of the
  next ``ticks`` ticks (``callgrind_control -i on/off``). The count does not depend on what else
  the machine is doing: two versions of the code compare within a fraction of a percent, so a
  change of a few percent is seen where the wall time cannot show it;
* **a fingerprint of every decision** (``--fingerprint``): a hash of each tick's proposal,
  decision, plan and action results and of the result's figures. Equal fingerprints before and
  after a change mean the change moved no decision (a speed-up must leave them equal).

Every result names the machine it was measured on (:func:`machine`): a tick's working set is
larger than some cores' L2 cache, so the same instructions take twice as long on a host with a
512 KiB L2 as on one with 2 MiB (both seen on this project's 2-core machines).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from autoscaler.core.model import TickRecord
from autoscaler.tools.sim.cluster import SimCluster
from autoscaler.tools.sim.runner import SimResult, simulate
from autoscaler.tools.traces import load_trace

TICKS_30_DAYS = 30 * 86400 // 10  # the yardstick: 30 days at a 10-second tick
_COLLECTED = re.compile(r"Collected\s*:\s*([0-9,]+)")
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_SIZE = re.compile(r"(\d+)\s*([KMG]?)")  # sysfs writes "48K", "2048K"
_UNIT_BYTES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class SimSpeedError(Exception):
    """A measurement could not be made (valgrind missing, the measured run failed)."""


def wall_per_tick(trace: Path, *, policy: str = "default", days: float = 0.5, repeats: int = 3) -> dict[str, Any]:
    """Microseconds per tick of ``repeats`` runs of the first ``days`` of ``trace``."""
    loaded = load_trace(trace)
    per_tick: list[float] = []
    ticks = 0
    for _ in range(repeats):
        result = simulate(loaded, policy=policy, days=days)
        ticks = math.floor(result.simulated_seconds / result.tick_seconds + 1e-9)  # as simulate counts them
        per_tick.append(result.wall_seconds / ticks * 1e6)
    fastest, median = min(per_tick), statistics.median(per_tick)
    return {
        "policy": policy,
        "trace": loaded.name,
        "days": days,
        "ticks": ticks,
        "repeats": repeats,
        "us_per_tick_min": round(fastest, 1),
        "us_per_tick_median": round(median, 1),
        "projected_30_days_seconds": round(fastest * TICKS_30_DAYS / 1e6, 1),
        "machine": machine(),
    }


def machine(caches: Path = CPU_CACHES, cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """What the wall times depend on: the Python, the CPU model and its caches (KiB, None: unknown)."""
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpu": _cpu_model(cpuinfo) or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "l2_kib": cache_kib(caches, 2),
        "l3_kib": cache_kib(caches, 3),
    }


def cache_kib(caches: Path, level: int) -> int | None:
    """Size of the first CPU's unified (or data) cache of ``level``, from sysfs's ``index*/{level,type,size}``."""
    try:
        for index in sorted(caches.glob("index*")):
            if _read(index / "level") == str(level) and _read(index / "type") in ("Unified", "Data"):
                found = _SIZE.fullmatch(_read(index / "size"))
                if found:
                    return int(found.group(1)) * _UNIT_BYTES[found.group(2)] // 1024
    except OSError:
        pass  # not Linux, or sysfs hidden: unknown
    return None


def _read(path: Path) -> str:
    return path.read_text().strip()


def _cpu_model(cpuinfo: Path) -> str | None:
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass  # no /proc (not Linux): the caller falls back to the platform's name
    return None


def decision_fingerprint(trace: Path, *, policy: str = "default", days: float = 1.0, seed: int = 0) -> str:
    """SHA-256 of every tick's proposal, decision, plan and results, and of the result's figures."""
    digest = hashlib.sha256()

    def on_tick(record: TickRecord, cluster: SimCluster) -> None:
        tick = {"at": record.at, "proposal": record.proposal, "decision": record.decision, "plan": record.plan, "results": record.results}
        digest.update(json.dumps(canonical(tick), sort_keys=True).encode())

    result = simulate(load_trace(trace), policy=policy, days=days, seed=seed, on_tick=on_tick)
    digest.update(json.dumps(_figures(result), sort_keys=True).encode())
    return digest.hexdigest()


def canonical(obj: Any) -> Any:
    """``obj`` as plain JSON data: what a decision says, not how its classes are written (a value's
    init fields by name, an enum by its value, times in ISO 8601 and seconds, floats exactly), so a
    fingerprint survives moving a class or changing a field's type to an equal-valued one."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
    if isinstance(obj, enum.Enum):
        return canonical(obj.value)
    if isinstance(obj, Mapping):
        return {str(key): canonical(item) for key, item in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [canonical(item) for item in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return repr(obj.total_seconds())
    if isinstance(obj, float):
        return repr(obj)
    return obj


def _figures(result: SimResult) -> dict[str, Any]:
    figures = result.to_json()
    figures.pop("wall_seconds")  # the only figure that is not the simulation's
    return figures


def instructions_per_tick(trace: Path, *, policy: str = "default", warm_days: float = 1.05, ticks: int = 400) -> dict[str, Any]:
    """Instructions per tick of ``ticks`` ticks from ``warm_days`` in, counted by callgrind."""
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        raise SimSpeedError(f"--instructions needs {' and '.join(missing)} on PATH (Debian package valgrind)")
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
        sys.executable, "-m", "autoscaler.tools.bench.sim_speed", str(trace), policy, repr(warm_days), str(ticks),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    counted = _collected(done.stderr)
    if done.returncode != 0 or counted is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SimSpeedError(f"the counted run failed (exit {done.returncode}): {' / '.join(tail)}")
    return {"policy": policy, "trace": Path(trace).stem, "warm_days": warm_days, "ticks": ticks, "instructions_per_tick": round(counted / ticks)}


def _collected(valgrind_stderr: str) -> int | None:
    """The instructions callgrind collected (its ``Collected : N`` line), None if it printed none."""
    found = _COLLECTED.search(valgrind_stderr)
    return int(found.group(1).replace(",", "")) if found else None


def _counted_run(trace: str, policy: str, warm_days: float, ticks: int) -> None:
    """Under callgrind: simulate up to ``warm_days`` uncounted, then count ``ticks`` ticks."""
    first = max(1, math.ceil(warm_days * 8640))  # counting starts after this tick
    seen = 0

    def toggle(state: str) -> None:
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True, check=True)

    def on_tick(record: TickRecord, cluster: SimCluster) -> None:
        nonlocal seen
        seen += 1
        if seen == first:
            toggle("on")
            time.sleep(0.5)  # the request is taken up at valgrind's next check, while this sleeps
        elif seen == first + ticks:
            toggle("off")

    simulate(load_trace(trace), policy=policy, days=(first + ticks + 1) * 10 / 86400, on_tick=on_tick)


if __name__ == "__main__":  # the program instructions_per_tick runs under valgrind
    _counted_run(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
