"""A running batch's rows, read from its checkpoint's offset log from the batch's first tick.

Progress events arrive only when a batch ends, and Spark's live stage metrics count a batch's
rows only as its tasks end: the first batch of a burst on the one executor left at the floor
runs its first task for tens of seconds before either says anything. But Spark writes the end
offset of each source to ``offsets/<N>`` when it *plans* batch N, before the batch runs, and the
previous batch's progress event gives its start. Where a source's offsets count rows (Kafka's
per-partition offsets, the project's trace source's ``{"row": N}``) their difference is the
batch's rows, exact from its start.

Whether they count rows is checked, not assumed: each finished batch's progress says both its
offsets and the rows it read (:func:`autoscaler.spark.progress.offsets_count_rows`). One batch
whose offsets moved by other than its rows (a file source counts files, the rate source
seconds, a transactional Kafka topic its commit markers too) turns the reader off for the query.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoscaler.runtime.logs import get_logger
from autoscaler.spark.checkpoint import CheckpointFiles, FileSystem, open_checkpoint, running_offsets
from autoscaler.spark.progress import as_offset, offset_gap, offsets_count_rows

log = get_logger("autoscaler.spark.planned")

# the longest a tick waits for the offset log: a local file answers in a millisecond; remote
# storage that is slower leaves the read running on its thread, for a later tick to pick up
READ_TIMEOUT_SECONDS = 0.5


def planned_rows(planned: Sequence[Any], previous_end: Sequence[Any]) -> int | None:
    """Rows between the previous batch's end offsets and a planned batch's, summed over the
    sources; None when a source's two offsets are not comparable numbers (or went back)."""
    if len(planned) != len(previous_end):
        return None
    total = 0
    for end, start in zip(planned, previous_end, strict=True):
        gap = offset_gap(as_offset(end), as_offset(start))
        if gap is None or gap < 0:
            return None
        total += gap
    return total


class PlannedRows:
    """The offset log of one hosted query, read for the batch that runs after the latest one a
    progress event reported. Progress comes on Spark's listener thread and the reads on a
    thread of their own, so a stalled remote store delays a tick by at most
    ``READ_TIMEOUT_SECONDS``."""

    def __init__(self, checkpoint: str | Path, hadoop: FileSystem | None, timeout: float = READ_TIMEOUT_SECONDS) -> None:
        self.checkpoint = checkpoint
        self.hadoop = hadoop
        self.timeout = timeout
        self._lock = threading.Lock()
        self.counts_rows: bool | None = None  # None: no batch has told yet; False: off for good
        self._latest: tuple[int, tuple[Any, ...]] | None = None  # latest reported batch and its end offsets
        self._known: tuple[int, int | None] | None = None  # a planned batch and its rows (None: not countable)
        self._read: threading.Thread | None = None
        self._files: CheckpointFiles | None = None  # opened by the first read, then kept (a remote one keeps its file system)

    def on_progress(self, progress: Mapping[str, Any]) -> None:
        """Keep a finished batch's end offsets, and whether its offsets counted its rows."""
        sources = progress.get("sources") or []
        verdict = offsets_count_rows(sources)
        with self._lock:
            self._latest = (int(progress["batchId"]), tuple(s.get("endOffset") for s in sources))
            if verdict is False:
                if self.counts_rows is not False:
                    log.info("offsets_do_not_count_rows", checkpoint=str(self.checkpoint), batch=progress.get("batchId"))
                self.counts_rows = False
            elif verdict and self.counts_rows is None:
                self.counts_rows = True

    def running_batch_rows(self) -> int | None:
        """The rows of the batch after the latest reported one, as planned; None while its offsets
        are not written (or not read within the timeout), or where offsets do not count rows."""
        with self._lock:
            if not self.counts_rows or self._latest is None:
                return None
            batch, previous_end = self._latest[0] + 1, self._latest[1]
            if self._known is not None and self._known[0] == batch:
                return self._known[1]
            read = self._read
            if read is None or not read.is_alive():
                read = self._read = threading.Thread(target=self._read_batch, args=(batch, previous_end), name="offset-log", daemon=True)
                read.start()
        read.join(self.timeout)
        with self._lock:
            return self._known[1] if self._known is not None and self._known[0] == batch else None

    def _read_batch(self, batch: int, previous_end: tuple[Any, ...]) -> None:
        try:
            if self._files is None:
                self._files = open_checkpoint(self.checkpoint, self.hadoop)
            planned = running_offsets(self._files, batch)
        except Exception as exc:  # unreadable now: the batch is judged as without this reader; read again next tick
            log.debug("offset_log_unreadable", checkpoint=str(self.checkpoint), batch=batch, error=f"{type(exc).__name__}: {exc}")
            return
        if planned is None:
            return  # not planned yet, or ended before its progress came: read again next tick
        rows = planned_rows(planned, previous_end)
        with self._lock:
            self._known = (batch, rows)
