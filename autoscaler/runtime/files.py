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
    the old file or the new one, not an empty one. The file gets the mode a plain write would
    leave: the old file's, or for a new one what the umask allows (the temporary file is made
    readable by its owner only, and a plot or a summary written so was unreadable to others).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)
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


def _mode_for(path: Path) -> int:
    """The permission bits ``open(path, "w")`` would leave: the file's own when it exists, else
    0o666 less the process's umask."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read from /proc (Linux): ``os.umask`` reads it only by setting it, and
    for that moment another thread of the daemon would create files with no umask at all; 0o022,
    the common one, where /proc does not say."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


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
