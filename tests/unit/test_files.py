"""Files written whole or not at all (``autoscaler.runtime.files``)."""

import os
from pathlib import Path

import pytest

from autoscaler.runtime.files import write_whole


def test_the_file_is_replaced_whole_and_its_directory_made(tmp_path: Path) -> None:
    path = tmp_path / "out" / "batch-3.json"
    write_whole(path, "old")
    write_whole(path, "new", durable=True)
    assert path.read_text() == "new"
    assert [p.name for p in path.parent.iterdir()] == ["batch-3.json"]


def test_the_temporary_file_is_hidden_from_globs_of_the_name(tmp_path: Path, monkeypatch) -> None:
    seen: list[list[str]] = []
    real_replace = os.replace

    def look_then_replace(src, dst):
        seen.append(sorted(p.name for p in tmp_path.glob("batch-*.json")))
        assert Path(src).name.startswith(".batch-1.json.") and Path(src).read_text() == "rows"
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", look_then_replace)
    write_whole(tmp_path / "batch-1.json", "rows")
    assert seen == [[]]  # a reader globbing for batches saw nothing until the file was whole


def test_a_failed_replace_keeps_the_old_file_and_removes_the_temporary_one(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "r.json"
    write_whole(path, "old")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_whole(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_the_file_gets_the_mode_a_plain_write_would_give(tmp_path: Path) -> None:
    # before: every file 0600, the temporary file's (a plot written for a web server unreadable to it)
    old_umask = os.umask(0o027)  # not the common 0o022: the umask is read, not assumed
    try:
        new = tmp_path / "plot.json"
        write_whole(new, "{}")
        assert new.stat().st_mode & 0o777 == 0o640
        kept = tmp_path / "state.json"
        kept.write_text("old")
        kept.chmod(0o600)  # an operator's own choice for an existing file is kept
        write_whole(kept, "new", durable=True)
        assert kept.stat().st_mode & 0o777 == 0o600 and kept.read_text() == "new"
    finally:
        os.umask(old_umask)
