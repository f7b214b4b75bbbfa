"""Read what a streaming checkpoint pins, straight from its files (no Spark needed).

Layout: ``offsets/<N>`` (written when batch N is planned: a version line, a metadata line
with the pinned confs, then one line per source) and ``commits/<N>`` (written when batch N
is done). ``state/`` exists for stateful queries.

Only a local checkpoint (a path or a ``file:`` URI) is read here; one on remote storage
(``s3a://``, ``gs://``, ``hdfs://``...) reads as missing and is never touched: ``Path`` would make
``s3a://bucket/ck`` the local directory ``s3a:/bucket/ck``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoscaler.core.settings import is_uri, local_path

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STATE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"


@dataclass(frozen=True)
class CheckpointInfo:
    exists: bool
    last_offset: int | None = None  # last planned batch
    last_commit: int | None = None  # last completed batch
    shuffle_partitions: int | None = None
    state_provider: str | None = None
    stateful: bool = False
    # the last planned batch's end offset of each source, as the source wrote it (parsed JSON
    # where it is JSON, else the text; "-" for a source without a new offset)
    source_offsets: tuple[Any, ...] = ()

    @property
    def clean(self) -> bool:
        """Every planned batch committed: nothing to replay."""
        return self.last_offset == self.last_commit

    @property
    def state_store(self) -> str | None:
        if not self.stateful:
            return None
        if self.state_provider and "RocksDB" in self.state_provider:
            return "rocksdb"
        return "hdfs"


def _batch_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def read_checkpoint(location: str | Path) -> CheckpointInfo:
    if is_uri(location):
        return CheckpointInfo(exists=False)  # remote: not readable from here
    root = local_path(location)
    if not root.is_dir():
        return CheckpointInfo(exists=False)
    offsets = _batch_ids(root / "offsets")
    commits = _batch_ids(root / "commits")
    conf: dict[str, str] = {}
    sources: tuple[Any, ...] = ()
    if offsets:
        lines = (root / "offsets" / str(offsets[-1])).read_text().splitlines()
        if len(lines) > 1:
            try:
                conf = json.loads(lines[1]).get("conf", {}) or {}
            except ValueError:
                conf = {}
        sources = tuple(_offset(line) for line in lines[2:])
    state = root / "state"
    shuffle = conf.get(SHUFFLE_PARTITIONS)
    return CheckpointInfo(
        exists=True,
        last_offset=offsets[-1] if offsets else None,
        last_commit=commits[-1] if commits else None,
        shuffle_partitions=int(shuffle) if shuffle else None,
        state_provider=conf.get(STATE_PROVIDER),
        stateful=state.is_dir() and any(state.iterdir()),
        source_offsets=sources,
    )


def _offset(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line


def remove_offsets_after(location: str | Path, last_kept: int | None) -> list[int]:
    """Delete planned batches after ``last_kept`` (and their .crc files).

    A failed ``repartition`` leaves such a dangling ``offsets/N`` behind, which makes the next
    start fail with STREAMING_UNFINISHED_REPARTITION_DETECTED.
    A remote checkpoint is left alone (nothing removed).
    """
    if is_uri(location):
        return []
    folder = local_path(location) / "offsets"
    removed = []
    for n in _batch_ids(folder):
        if last_kept is None or n > last_kept:
            (folder / str(n)).unlink(missing_ok=True)
            (folder / f".{n}.crc").unlink(missing_ok=True)
            removed.append(n)
    return removed
