"""A real Spark standalone cluster on loopback: one master and worker processes we own.

The pip package has no ``sbin/start-master.sh``; ``bin/spark-class`` execs the JVM, so the
Popen pid is the JVM pid and SIGTERM/SIGKILL reach it directly. Used by the demo and the
tests to add and remove capacity the way spot nodes or a cluster autoscaler would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection

from autoscaler.runtime.net import free_port
from autoscaler.runtime.waiting import poll
from autoscaler.spark.rest import get_json
from autoscaler.spark.session import CLUSTER_LOG_CONFIG, log_config_option


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def executor_pids(app_id: str) -> list[int]:
    """The executor JVMs of one application on this machine (``CoarseGrainedExecutorBackend ...
    --app-id <id>``): what a fault test or the soak kills to lose an executor."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline and app_id.encode() in cmdline:
            pids.append(int(proc.name))
    return sorted(pids)


def _status(webui_port: int) -> dict[str, object] | None:
    """A master's or worker's JSON status from its web UI, or None while it gives none."""
    try:
        data = get_json(f"http://127.0.0.1:{webui_port}/json/", timeout=2)
    except (OSError, ValueError):  # not answering, or not JSON (the HTML page while it starts)
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Worker:
    index: int
    process: subprocess.Popen[bytes]
    webui_port: int  # names the worker in the master's status (its ``webuiaddress``)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


class LocalStandaloneCluster:
    def __init__(self, workdir: Path, *, cores_per_worker: int = 1, memory: str = "1g", recovery: bool = False) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        # the master keeps its applications and workers in workdir/recovery, so one started again
        # takes them back (Spark's FILESYSTEM recovery mode); without it a restarted master knows
        # no application and the workers drop their executors
        self.recovery = recovery
        self.port = free_port()
        self.webui_port = free_port()
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[Worker] = []
        self._next = 0

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
            SPARK_LOG_DIR=str(self.workdir / "logs"),
            # the master's and workers' own logs (their files): warnings and errors only
            SPARK_DAEMON_JAVA_OPTS=f"{log_config_option(CLUSTER_LOG_CONFIG)} {os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')}".strip(),
        )
        return env

    def _spawn(self, args: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.workdir / log_name, "ab")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        return subprocess.Popen(cmd, env={**self._env(), **(env or {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, workers: int = 1, timeout: float = 60) -> str:
        self.start_master(timeout)
        for _ in range(workers):
            self.add_worker()
        self.wait_for_workers(workers, timeout)
        return self.url

    def start_master(self, timeout: float = 60) -> None:
        """Start the master on the cluster's port (again, after :meth:`stop_master`)."""
        self.master = self._spawn(
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.webui_port),
            ],
            "master.log",
            env=self._master_env(),
        )
        self._wait(lambda: self.state() is not None, timeout, "master did not answer")

    def _master_env(self) -> dict[str, str]:
        if not self.recovery:
            return {}
        directory = self.workdir / "recovery"
        directory.mkdir(parents=True, exist_ok=True)
        return {"SPARK_MASTER_OPTS": f"-Dspark.deploy.recoveryMode=FILESYSTEM -Dspark.deploy.recoveryDirectory={directory}"}

    def stop_master(self) -> None:
        """Stop the master (an outage): workers and running executors stay."""
        if self.master is not None and self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)
            self.master.wait(timeout=30)

    def add_worker(self) -> Worker:
        index = self._next
        self._next += 1
        webui_port = free_port()
        work = self.workdir / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        proc = self._spawn(
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1",
                "--cores", str(self.cores_per_worker),
                "--memory", self.memory,
                "--work-dir", str(work),
                "--webui-port", str(webui_port),
                self.url,
            ],
            f"worker-{index}.log",
        )
        worker = Worker(index, proc, webui_port)
        self.workers.append(worker)
        return worker

    def remove_worker(self, worker: Worker | None = None, *, kill: bool = True) -> Worker | None:
        """Stop a worker: SIGKILL models a lost node, SIGTERM a drained one. By default the newest
        that runs an executor, else the newest: a node lost is one the application was using (a
        worker still waiting for its executor to start would take nothing with it)."""
        alive = [w for w in self.workers if w.alive]
        if not alive:
            return None
        worker = worker or (self.workers_running_executors() or alive)[-1]
        worker.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        worker.process.wait(timeout=30)
        return worker

    def state(self) -> dict[str, object] | None:
        """The master's JSON status, or None while it gives none (not listening yet, or still
        starting: a CI run once got the HTML status page from ``/json/`` right after start-up).
        Callers wait for a usable answer and time out with their own message."""
        return _status(self.webui_port)

    def alive_workers(self) -> int:
        state = self.state() or {}
        workers = state.get("workers")
        if not isinstance(workers, list):
            return 0
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def workers_running_executors(self) -> list[Worker]:
        """The live workers the master says have cores in use (an executor's), oldest first."""
        state = self.state() or {}
        entries = state.get("workers")
        busy_ports = {
            urllib.parse.urlsplit(str(entry.get("webuiaddress", ""))).port
            for entry in (entries if isinstance(entries, list) else [])
            if isinstance(entry, dict) and entry.get("state") == "ALIVE" and int(entry.get("coresused") or 0) > 0
        }
        return [w for w in self.workers if w.alive and w.webui_port in busy_ports]

    def executors_on(self, worker: Worker) -> set[str]:
        """The ids of the executors this worker runs (its own status; empty while it gives none)."""
        executors = (_status(worker.webui_port) or {}).get("executors")
        return {str(e["id"]) for e in (executors if isinstance(executors, list) else []) if isinstance(e, dict) and "id" in e}

    def worker_hosting(self, executor_ids: Collection[str]) -> Worker | None:
        """The newest live worker running one of these executors (ids as the driver names them:
        standalone numbers an application's executors itself), or None."""
        wanted = set(executor_ids)
        return next((w for w in reversed(self.workers) if w.alive and self.executors_on(w) & wanted), None)

    def wait_for_workers(self, count: int, timeout: float = 60) -> None:
        self._wait(lambda: self.alive_workers() >= count, timeout, f"{count} worker(s) did not register")

    @staticmethod
    def _wait(check: Callable[[], bool], timeout: float, message: str) -> None:
        if not poll(check, timeout, interval=0.3):
            raise TimeoutError(message)

    def stop(self) -> None:
        for w in self.workers:
            if w.alive:
                w.process.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                w.process.kill()
        if self.master is not None and self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)
            try:
                self.master.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.master.kill()

    def __enter__(self) -> LocalStandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
