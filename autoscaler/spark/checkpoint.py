"""Read what a streaming checkpoint pins, straight from its files.

Layout: ``offsets/<N>`` (written when batch N is planned: a version line, a metadata line
with the pinned confs, then one line per source) and ``commits/<N>`` (written when batch N
is done). ``state/`` exists for stateful queries.

One parser (:func:`parse_checkpoint`, :func:`drop_offsets_after`) reads the files through a
:class:`CheckpointFiles`, of which there are two:

- :class:`LocalFiles`: a local checkpoint (a path or a ``file:`` URI), with Python's file API;
  no Spark needed (unit tests, the tools).
- :class:`HadoopFiles`: any checkpoint, through the Spark driver's own JVM and the Hadoop file
  system Spark writes the checkpoint with (``s3a://``, ``gs://``, ``hdfs://``, ``abfss://``, with
  the session's Hadoop configuration and credentials). The query host reads remote checkpoints
  with it (:func:`hadoop_files`).

A remote URI is never read as a local path (``Path`` makes ``s3a://bucket/ck`` the local
directory ``s3a:/bucket/ck``): without a Hadoop file system to read it with, and when Hadoop
cannot reach it, reading raises :class:`CheckpointUnreadable` naming the checkpoint and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

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


class CheckpointUnreadable(RuntimeError):
    """A checkpoint whose files could not be read (or changed): its location and why.

    Raised rather than reported as a missing checkpoint (``exists=False``): a caller that took
    "unreadable" for "missing" would go ahead with what the checkpoint forbids (a change of the
    shuffle partitions it pins, a repartition of a state store it cannot tell), and one that
    forgets to handle it fails with the reason instead of doing so silently.
    """

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"checkpoint {location} could not be read: {reason}")
        self.location = location
        self.reason = reason


class CheckpointFiles(Protocol):
    """The files of one checkpoint, as the parser needs them. ``folder`` and ``file`` are
    relative to the checkpoint (``"offsets"``, ``"offsets/3"``)."""

    location: str

    def exists(self) -> bool:
        """Whether the checkpoint's directory exists."""
        ...

    def names(self, folder: str) -> list[str]:
        """The names of the entries of ``folder`` (none when it does not exist)."""
        ...

    def read_text(self, file: str) -> str: ...

    def delete(self, file: str) -> None:
        """Delete ``file``; one that does not exist is no error."""
        ...


# a checkpoint's files from its location (a URI)
FileSystem = Callable[[str], CheckpointFiles]


class LocalFiles:
    """A checkpoint on the local disk, read with Python's file API."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def exists(self) -> bool:
        return self.root.is_dir()

    def names(self, folder: str) -> list[str]:
        path = self.root / folder
        return [p.name for p in path.iterdir()] if path.is_dir() else []

    def read_text(self, file: str) -> str:
        return (self.root / file).read_text()

    def delete(self, file: str) -> None:
        (self.root / file).unlink(missing_ok=True)


class HadoopFiles:
    """A checkpoint on any Hadoop file system, read through the Spark driver's JVM (py4j).

    The file system is the one Spark writes the checkpoint with: ``Path(uri).getFileSystem`` with
    the session's Hadoop configuration (``sessionState.newHadoopConf()``, as a streaming query
    uses: the ``spark.hadoop.*`` settings and the session's own ``fs.*`` ones). Every failure
    (no file system for the scheme, refused credentials, storage unreachable, no JVM) is raised
    as :class:`CheckpointUnreadable` with the JVM's exception as its reason; only a folder or
    checkpoint that does not exist (``FileNotFoundException``) is an answer.
    """

    def __init__(self, spark: Any, location: str) -> None:
        self.spark = spark
        self.location = location
        self._root: Any = None
        self._fs: Any = None

    def exists(self) -> bool:
        try:
            root, fs = self._filesystem()
            return bool(fs.getFileStatus(root).isDirectory())
        except Exception as exc:
            if self._not_found(exc):
                return False
            raise self._unreadable(exc) from exc

    def names(self, folder: str) -> list[str]:
        try:
            root, fs = self._filesystem()
            return [str(status.getPath().getName()) for status in fs.listStatus(self._path(root, folder))]
        except Exception as exc:
            if self._not_found(exc):
                return []
            raise self._unreadable(exc) from exc

    def read_text(self, file: str) -> str:
        try:
            root, fs = self._filesystem()
            stream = fs.open(self._path(root, file))
            try:
                data = stream.readAllBytes()
            finally:
                stream.close()
        except Exception as exc:
            raise self._unreadable(exc) from exc
        return bytes(data).decode("utf-8")

    def delete(self, file: str) -> None:
        try:
            root, fs = self._filesystem()
            fs.delete(self._path(root, file), False)  # False when it does not exist
        except Exception as exc:
            raise self._unreadable(exc) from exc

    def _filesystem(self) -> tuple[Any, Any]:
        if self._fs is None:
            jvm = self.spark._jvm
            try:
                conf = self.spark._jsparkSession.sessionState().newHadoopConf()
            except Exception:  # a session without SQL state (a bare context): the context's configuration
                conf = self.spark._jsc.hadoopConfiguration()
            root = jvm.org.apache.hadoop.fs.Path(self.location)
            self._fs, self._root = root.getFileSystem(conf), root
        return self._root, self._fs

    def _path(self, root: Any, relative: str) -> Any:
        return self.spark._jvm.org.apache.hadoop.fs.Path(root, relative)

    def _not_found(self, exc: Exception) -> bool:
        java = getattr(exc, "java_exception", None)
        if java is None:
            return False
        try:
            return bool(self.spark._jvm.java.lang.Class.forName("java.io.FileNotFoundException").isInstance(java))
        except Exception:  # the JVM cannot tell (gone meanwhile): not "missing", so the caller raises it as unreadable
            return False

    def _unreadable(self, exc: Exception) -> CheckpointUnreadable:
        java = getattr(exc, "java_exception", None)
        reason = None
        if java is not None:
            try:
                reason = str(java.toString())  # "java.nio.file.AccessDeniedException: s3a://...: ..."
            except Exception:  # the JVM cannot describe it (gone meanwhile): the Python exception below is the reason
                pass
        return CheckpointUnreadable(self.location, (reason or f"{type(exc).__name__}: {exc}")[:1000])


def hadoop_files(spark: Any) -> FileSystem:
    """Checkpoints read through ``spark``'s JVM and Hadoop file systems (:class:`HadoopFiles`)."""
    return lambda location: HadoopFiles(spark, location)


def open_checkpoint(location: str | Path, hadoop: FileSystem | None = None) -> CheckpointFiles:
    """The files of the checkpoint at ``location``: a path or a ``file:`` URI on the local disk
    (:class:`LocalFiles`); any other URI through ``hadoop``. A remote URI without ``hadoop``
    raises :class:`CheckpointUnreadable`: it is never looked for on the local disk, nor taken
    for missing."""
    if not is_uri(location):
        return LocalFiles(local_path(location))
    if hadoop is None:
        raise CheckpointUnreadable(
            str(location), "it is on remote storage, read only through a Spark session's Hadoop file system, and none was given"
        )
    return hadoop(str(location))


def read_checkpoint(location: str | Path, *, hadoop: FileSystem | None = None) -> CheckpointInfo:
    """What the checkpoint at ``location`` pins (:func:`open_checkpoint`, :func:`parse_checkpoint`).

    A checkpoint that does not exist (yet) is ``exists=False``; one that cannot be read raises
    :class:`CheckpointUnreadable` with the reason, never ``exists=False``."""
    return parse_checkpoint(open_checkpoint(location, hadoop))


def _batch_ids(files: CheckpointFiles, folder: str) -> list[int]:
    return sorted(int(name) for name in files.names(folder) if name.isdigit())


def parse_checkpoint(files: CheckpointFiles) -> CheckpointInfo:
    """What a checkpoint pins, read from its files."""
    if not files.exists():
        return CheckpointInfo(exists=False)
    offsets = _batch_ids(files, "offsets")
    commits = _batch_ids(files, "commits")
    conf: dict[str, str] = {}
    sources: tuple[Any, ...] = ()
    if offsets:
        lines = files.read_text(f"offsets/{offsets[-1]}").splitlines()
        if len(lines) > 1:
            try:
                conf = json.loads(lines[1]).get("conf", {}) or {}
            except ValueError:
                conf = {}
        sources = _source_offsets(lines)
    shuffle = conf.get(SHUFFLE_PARTITIONS)
    return CheckpointInfo(
        exists=True,
        last_offset=offsets[-1] if offsets else None,
        last_commit=commits[-1] if commits else None,
        shuffle_partitions=int(shuffle) if shuffle else None,
        state_provider=conf.get(STATE_PROVIDER),
        stateful=bool(files.names("state")),
        source_offsets=sources,
    )


def _source_offsets(lines: list[str]) -> tuple[Any, ...]:
    """Each source's end offset from an ``offsets/<N>`` file's lines (after the version and the
    metadata lines)."""
    return tuple(_offset(line) for line in lines[2:])


def _offset(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line


def running_offsets(files: CheckpointFiles, batch: int) -> tuple[Any, ...] | None:
    """The end offset of each source that batch ``batch`` was planned with (``offsets/<batch>``,
    written before the batch runs; parsed JSON where it is JSON, else the text), None while it
    is not planned and once it is committed (it ended). One that cannot be read raises
    :class:`CheckpointUnreadable`."""
    if str(batch) not in files.names("offsets") or str(batch) in files.names("commits"):
        return None
    return _source_offsets(files.read_text(f"offsets/{batch}").splitlines())


def remove_offsets_after(location: str | Path, last_kept: int | None, *, hadoop: FileSystem | None = None) -> list[int]:
    """Delete planned batches after ``last_kept`` (and their .crc files) of the checkpoint at
    ``location`` (:func:`open_checkpoint`, :func:`drop_offsets_after`); the batch ids removed.

    A failed ``repartition`` leaves such a dangling ``offsets/N`` behind, which makes the next
    start fail with STREAMING_UNFINISHED_REPARTITION_DETECTED. A checkpoint that cannot be read
    or changed raises :class:`CheckpointUnreadable`: "nothing removed" would hide that the next
    start will fail.
    """
    return drop_offsets_after(open_checkpoint(location, hadoop), last_kept)


def drop_offsets_after(files: CheckpointFiles, last_kept: int | None) -> list[int]:
    """Delete ``offsets/N`` (and ``offsets/.N.crc``) for every N after ``last_kept`` (all: None)."""
    removed = []
    for n in _batch_ids(files, "offsets"):
        if last_kept is None or n > last_kept:
            files.delete(f"offsets/{n}")
            files.delete(f"offsets/.{n}.crc")
            removed.append(n)
    return removed
