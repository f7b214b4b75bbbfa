"""Simulations in worker processes that stop when the command stops.

``concurrent.futures.ProcessPoolExecutor`` leaves its ``with`` block by waiting for every
submitted call, the queued ones included: Ctrl-C or ``kill`` during ``benchmark traces --jobs 2``
went on running the hours of runs still queued. Here a failure, an interrupt or a consumer that
stops early cancels what is queued and stops the workers at once (Python 3.14's
``terminate_workers``; before it, each worker process is terminated). The workers ignore Ctrl-C
(the terminal sends it to every process of the group; only this process decides) and die
quietly on SIGTERM instead of each printing a traceback.

Not ``multiprocessing.Pool``: its ``terminate()`` right after it started its workers hung in
the test suite (the pytest process, with a Spark JVM's threads in it), waiting for a worker it
had not sent SIGTERM.
"""

from __future__ import annotations

import signal
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _quiet_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def as_finished(fn: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[tuple[T, R]]:
    """``(item, fn(item))`` for each item as it finishes, in ``jobs`` worker processes (``fn``
    and the items must pickle). The first failure is raised here; it, an interrupt, or leaving
    the loop early stops every worker at once."""
    todo = list(items)
    if not todo:
        return
    pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo))), initializer=_quiet_worker)
    try:
        futures = {pool.submit(fn, item): item for item in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()
    except BaseException:
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    # every worker was started by the submits above (fork starts them all at once, and none is
    # replaced later without max_tasks_per_child)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()
