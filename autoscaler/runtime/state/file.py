"""A state store in a local JSON file, replaced atomically on every save.

A save writes a temporary file in the same directory, flushes and fsyncs it, renames it over
the state file (atomic on POSIX) and fsyncs the directory, so a crash leaves either the old
or the new state, never a torn file. An unchanged state is not rewritten. A state file that
cannot be read stops the daemon at start-up with the path and the problem: silently starting
from scratch would drop an operator's pause or mode override. A daemon killed in the middle of
a save leaves its temporary file behind: reading the state at start-up removes such leftovers
(this store has one writer, the daemon, which has not written yet).
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from autoscaler.runtime.files import write_whole
from autoscaler.runtime.state.base import StateStoreError, decode_state, encode_state


class FileStateStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._last_text: str | None = None
        self.removed_leftovers: list[str] = []  # temporary files of unfinished saves, removed by load()

    def __repr__(self) -> str:
        return f"FileStateStore({str(self.path)!r})"

    def __str__(self) -> str:
        return f"state file {str(self.path)!r}"

    def load(self) -> dict[str, Any] | None:
        with self._lock:
            self.removed_leftovers = self._remove_leftovers()
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise StateStoreError(f"{self}: cannot be read: {exc}") from None
            except UnicodeDecodeError as exc:  # a hand edit saved as UTF-16, or another file altogether
                raise StateStoreError(f"{self}: is not UTF-8 text ({exc.reason} at byte {exc.start}); fix or remove it to start afresh") from None
            state = decode_state(text, str(self))
            self._last_text = text
            return state

    def save(self, state: dict[str, Any]) -> None:
        text = encode_state(state)  # fails before the file is touched
        with self._lock:
            if text == self._last_text:
                return
            try:
                self._write(text)
            except OSError as exc:
                raise StateStoreError(f"{self}: cannot be written: {exc}") from exc
            self._last_text = text

    def _remove_leftovers(self) -> list[str]:
        """Temporary files of saves (or write checks) a killed daemon did not finish."""
        removed = []
        if self.path.parent.is_dir():
            for leftover in [*self.path.parent.glob(f".{self.path.name}.*.tmp"), *self.path.parent.glob(f".{self.path.name}.*.probe")]:
                try:
                    leftover.unlink()
                    removed.append(leftover.name)
                except OSError:
                    pass  # a read-only directory: it stays, and harms nothing
        return removed

    def check_writable(self) -> None:
        """Raise :class:`StateStoreError` unless the file could be saved: tried with a temporary
        file in its directory, or in the nearest existing ancestor while the directory does not
        exist yet (the first save creates it). Nothing is left behind; permission bits say
        little to root, so it is tried rather than read off the mode."""
        directory = self.path.parent
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        try:
            if self.path.is_dir():
                raise IsADirectoryError(errno.EISDIR, "is a directory", str(self.path))
            fd, probe = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".probe", dir=directory)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise StateStoreError(f"{self}: cannot be written: {exc}") from exc

    def _write(self, text: str) -> None:
        write_whole(self.path, text, durable=True)
