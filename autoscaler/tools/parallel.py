"""Simulations in worker processes that stop when the command stops.

``concurrent.futures.ProcessPoolExecutor`` leaves its ``with`` block by waiting for every
submitted call, the queued ones included: Ctrl-C or ``kill`` during ``benchmark traces --jobs 2``
went on running the hours of runs still queued. ``multiprocessing.Pool`` ends its ``with`` block
with ``terminate()``: the workers are stopped at once, whatever they run. The workers ignore
Ctrl-C (the terminal sends it to every process of the group; only this process decides) and die
quietly on ``terminate()``'s SIGTERM instead of each printing a traceback.
"""

from __future__ import annotations

import multiprocessing
import signal
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _quiet_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _call(job: tuple[Callable[[T], R], int, T]) -> tuple[int, R]:
    fn, index, item = job
    return index, fn(item)


def as_finished(fn: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[tuple[T, R]]:
    """``(item, fn(item))`` for each item as it finishes, in ``jobs`` worker processes (``fn``
    and the items must pickle). The first failure is raised here; it, an interrupt, or leaving
    the loop early stops every worker at once."""
    todo = list(items)
    with multiprocessing.Pool(processes=max(1, min(jobs, len(todo) or 1)), initializer=_quiet_worker) as pool:
        for index, result in pool.imap_unordered(_call, [(fn, i, item) for i, item in enumerate(todo)]):
            yield todo[index], result
