"""A real Prometheus server answers the dashboard's queries (Debian's ``prometheus`` package).

A metrics recording (``demo --record``, :mod:`~autoscaler.tools.dashboard.recording`) is written
as OpenMetrics text with a timestamp per sample, backfilled into a fresh TSDB with ``promtool
tsdb create-blocks-from openmetrics``, and served by a ``prometheus`` process on a loopback port
with nothing to scrape; :class:`PrometheusQueries` asks its HTTP API for each panel's range
query. A running Prometheus (one that scrapes the daemon) is asked the same way.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from autoscaler.runtime.net import free_port
from autoscaler.tools.dashboard.recording import Recording

Labels = frozenset[tuple[str, str]]
Series = dict[Labels, list[tuple[float, float]]]
START_TIMEOUT = 60.0  # seconds for a fresh server to load its TSDB and answer /-/ready
# a range query's points a series, at most: Prometheus refuses (end - start) / step above it
# ("exceeded maximum resolution of 11,000 points per timeseries")
MAX_POINTS = 11_000
RESOLUTION = 0.001  # seconds: Prometheus's timestamps are whole milliseconds


def least_step(span: float) -> float:
    """The least step, in whole milliseconds, that answers ``span`` seconds within :data:`MAX_POINTS`
    points (a step is sent as whole milliseconds: rounded, a finer one could cross the limit)."""
    return max(math.ceil(span / MAX_POINTS / RESOLUTION) * RESOLUTION, RESOLUTION)


def fitting_step(span: float, step: float) -> float:
    """``step``, or :func:`least_step` when it is finer: a recording of more than 11,000 scrapes is
    drawn as Grafana draws a long range, a point every few scrapes."""
    return max(step, least_step(span))


class PrometheusError(Exception):
    """Prometheus or promtool is missing, failed, or refused a query."""


def tool(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``, or a clear error naming the package."""
    path = shutil.which(name)
    if path is None:
        raise PrometheusError(f"{name} is not installed: the dashboard is drawn by a real Prometheus (Debian package `prometheus`)")
    return path


def openmetrics(recording: Recording) -> str:
    """The recording as OpenMetrics text: every sample with its scrape's timestamp, ``# EOF`` last."""
    lines = []
    for t, scrape in zip(recording.times, recording.scrapes, strict=True):
        for (name, labels), value in scrape.items():
            if math.isfinite(value):
                inner = ",".join(f'{key}="{_escape(val)}"' for key, val in sorted(labels))
                lines.append(f"{name}{{{inner}}} {value!r} {t:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def backfill(recording: Recording, tsdb: Path) -> None:
    """Write the recording into TSDB blocks under ``tsdb`` (``promtool tsdb create-blocks-from openmetrics``)."""
    if not recording.times:
        raise PrometheusError("the recording has no scrapes")
    tsdb.mkdir(parents=True, exist_ok=True)
    source = tsdb.parent / f"{tsdb.name}.om.txt"
    source.write_text(openmetrics(recording), encoding="utf-8")
    try:
        done = subprocess.run(
            [tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        source.unlink(missing_ok=True)
    if done.returncode != 0:
        raise PrometheusError(f"promtool could not backfill the recording: {(done.stderr or done.stdout).strip()[-500:]}")


@contextmanager
def prometheus_server(tsdb: Path, *, rule_files: Sequence[Path] = (), evaluation_interval: str = "15s") -> Iterator[str]:
    """A ``prometheus`` process serving ``tsdb`` on a free loopback port, scraping nothing; yields
    its base URL and stops it on exit. ``rule_files`` are loaded and evaluated every ``evaluation_interval``."""
    config = tsdb.parent / f"{tsdb.name}.prometheus.yml"
    lines = ["global:", f"  evaluation_interval: {evaluation_interval}", "rule_files:", *[f"  - {json.dumps(str(path))}" for path in rule_files]]
    config.write_text("\n".join(lines) + ("\n" if rule_files else " []\n"), encoding="utf-8")
    port = free_port()
    log = tsdb.parent / f"{tsdb.name}.prometheus.log"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={tsdb}",
                "--storage.tsdb.retention.time=36500d",  # keep a recording of any age
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, log)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PrometheusError(f"prometheus exited with code {process.returncode}: {log.read_text()[-800:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise PrometheusError(f"prometheus did not become ready within {START_TIMEOUT:.0f} s: {log.read_text()[-800:]}")


@contextmanager
def served_recording(recording: Recording, *, rule_files: Sequence[Path] = (), evaluation_interval: str = "15s") -> Iterator[str]:
    """A throwaway Prometheus holding ``recording``: backfilled, served, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="spark-autoscaler-prometheus-") as scratch:
        tsdb = Path(scratch) / "tsdb"
        backfill(recording, tsdb)
        with prometheus_server(tsdb, rule_files=rule_files, evaluation_interval=evaluation_interval) as url:
            yield url


class PrometheusQueries:
    """Range queries over ``[start, end]`` at ``step`` seconds against a Prometheus HTTP API."""

    def __init__(self, url: str, start: float, end: float, step: float) -> None:
        if step < (least := least_step(end - start)):
            raise ValueError(f"a step of {step:g} s over {end - start:g} s: give at least {least:g} s")
        self.url = url.rstrip("/")
        self.start, self.end, self.step = start, end, step

    def series(self, expr: str) -> Series:
        """Each output series of ``expr`` with its points (unix seconds, value), finite ones only."""
        params = {"query": expr, "start": f"{self.start:.3f}", "end": f"{self.end:.3f}", "step": f"{self.step:.3f}"}
        data = get_json(f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(params)}")
        out: Series = {}
        for result in data["data"]["result"]:
            points = [(float(t), float(v)) for t, v in result["values"] if math.isfinite(float(v))]
            if points:
                out[frozenset(result["metric"].items())] = points
        return out


def get_json(url: str) -> dict:
    """A Prometheus API answer; its error (a bad query, say) as a :class:`PrometheusError`."""
    server = url.split("/api/v1/", 1)[0]  # named in errors rather than the encoded query, which is not what failed
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read())
        except ValueError:
            raise PrometheusError(f"the Prometheus at {server} answered HTTP {exc.code}") from None
    except OSError as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise PrometheusError(f"cannot reach the Prometheus at {server}: {reason}") from None
    except ValueError:  # a web page, the daemon's own /metrics: a traceback before
        body = None
    if not isinstance(body, dict):  # not JSON, or JSON of something else
        raise PrometheusError(f"{server} answered, but not with the JSON of Prometheus's API: is it a Prometheus server?")
    if body.get("status") != "success":
        raise PrometheusError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
    return body
