"""Streaming checkpoints written for tests: on the local disk as Spark lays them out, and in
memory as remote storage looks to the parser."""

import json

from autoscaler.spark.checkpoint import CheckpointUnreadable


def make_checkpoint(root, offsets, commits, conf=None, state=False, sources=('{"row":1}',)):
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for n in offsets:
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": conf or {}}
        (root / "offsets" / str(n)).write_text("v1\n" + json.dumps(meta) + "\n" + "".join(f"{line}\n" for line in sources))
        (root / "offsets" / f".{n}.crc").write_text("crc")
    for n in commits:
        (root / "commits" / str(n)).write_text("v1\n{}\n")
    if state:
        (root / "state" / "0").mkdir(parents=True)


class MemoryFiles:
    """A checkpoint's files in a dict (path relative to the checkpoint -> text): remote storage
    as the parser sees it. ``failure``: every access raises CheckpointUnreadable with it."""

    def __init__(self, location, files=None, failure=None):
        self.location, self.files, self.failure = location, dict(files or {}), failure

    @classmethod
    def of(cls, location, root):
        return cls(location, {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()})

    def _check(self):
        if self.failure:
            raise CheckpointUnreadable(self.location, self.failure)

    def exists(self):
        self._check()
        return bool(self.files)

    def names(self, folder):
        self._check()
        return sorted({p[len(folder) + 1 :].split("/")[0] for p in self.files if p.startswith(folder + "/")})

    def read_text(self, file):
        self._check()
        return self.files[file]

    def delete(self, file):
        self._check()
        self.files.pop(file, None)
