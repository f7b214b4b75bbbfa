"""Files written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_whole(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part.

    The text goes to a temporary file beside ``path`` (``.<name>.<random>.tmp``, so globs for the
    name do not see it), which then replaces ``path`` (``os.replace``, atomic on one file system);
    a failure removes the temporary file. ``durable``: the data reaches the disk (``fsync``)
    before the replace and the rename after it (the directory's ``fsync``), so a crash leaves
    the old file or the new one, not an empty one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some file systems cannot open a directory; the rename is done
    try:
        os.fsync(fd)
    except OSError:
        pass  # a file system that cannot sync a directory (some network ones): the rename is done
    finally:
        os.close(fd)
