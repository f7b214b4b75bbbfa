"""User pipelines hosted by the daemon.

A pipeline is a function that, given the session and a :class:`PipelineContext` (current
parallelism, rate limit, ...), builds the streaming query up to its ``DataStreamWriter``
without starting it. The daemon sets the query name, checkpoint location and trigger, starts
it, and rebuilds it with new settings when it rescales from the checkpoint::

    from autoscaler import pipeline

    @pipeline("clicks", trigger="2s", max_parallelism=64)
    def clicks(spark, ctx):
        src = spark.readStream.format("kafka").option("minPartitions", ctx.parallelism)...
        return src.groupBy(...).count().writeStream.foreachBatch(upsert)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
from dataclasses import dataclass, replace
from datetime import timedelta
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

from autoscaler.core.model import JAVA_INT_MAX, JAVA_LONG_MAX, QueryParams
from autoscaler.core.settings import is_uri, local_path, parse_duration, uri_key
from autoscaler.runtime.config import file_problem, moved_checkpoints


class PipelineError(ValueError):
    """A pipeline module or pipeline definition is unusable; the message names it."""


@dataclass(frozen=True)
class PipelineContext:
    """What a pipeline builder may use to shape its query."""

    name: str
    parallelism: int  # source partitions to read with
    checkpoint_location: str
    max_rows_per_batch: int | None = None  # the rate limit (the operator's, or the daemon's with manage_rate_limit), if any
    trigger_interval: timedelta | None = None
    shuffle_partitions: int | None = None


Builder = Callable[[Any, PipelineContext], Any]
DEFAULT_TRIGGER = timedelta(seconds=2)
# a query name is a directory name under the checkpoint root: file systems take 255 bytes
MAX_NAME_BYTES = 200


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    build: Builder
    trigger: timedelta | None = DEFAULT_TRIGGER
    available_now: bool = False  # bounded: process what is there, commit and finish
    initial_parallelism: int | None = None
    min_parallelism: int = 1
    max_parallelism: int = 256
    partitions_per_core: int = 1
    max_rows_per_batch: int | None = None
    shuffle_partitions: int | None = None  # for a new checkpoint of a stateful query
    checkpoint: str | None = None  # default: <checkpoint_root>/<name>; relative in a .py file: to the file
    # the builder passes ctx.max_rows_per_batch to its source (Kafka's maxOffsetsPerTrigger):
    # without a limit of its own, the daemon bounds each batch when it restarts the query
    manage_rate_limit: bool = False

    def initial_params(self, cores: int) -> QueryParams:
        from autoscaler.core.capacity import aligned_parallelism

        parallelism = self.initial_parallelism or aligned_parallelism(
            cores, self.partitions_per_core, self.min_parallelism, self.max_parallelism
        )
        return QueryParams(
            parallelism=parallelism,
            shuffle_partitions=self.shuffle_partitions,
            trigger_interval=None if self.available_now else self.trigger,
            max_rows_per_batch=self.max_rows_per_batch,
        )


_collected: list[PipelineSpec] = []
_collect_lock = threading.Lock()
_UNSET: Any = object()  # a trigger the decorator was not given


def pipeline(
    name: str | None = None,
    *,
    trigger: str | float | timedelta | None = _UNSET,
    available_now: bool = False,
    initial_parallelism: int | None = None,
    min_parallelism: int = 1,
    max_parallelism: int = 256,
    partitions_per_core: int = 1,
    max_rows_per_batch: int | None = None,
    shuffle_partitions: int | None = None,
    checkpoint: str | None = None,
    manage_rate_limit: bool = False,
) -> Callable[[Builder], Builder]:
    """Declare a pipeline; the decorated function builds its ``DataStreamWriter``."""

    def decorate(fn: Builder) -> Builder:
        spec_name = fn.__name__ if name is None else name  # an empty name is refused, not replaced
        if available_now and trigger is not _UNSET:
            # silently ignoring it would leave the author believing it applies
            raise PipelineError(
                f"pipeline {spec_name!r}: trigger does not apply to an available_now pipeline "
                "(it processes what is there, commits and finishes); drop one of them"
            )
        given = DEFAULT_TRIGGER if trigger is _UNSET else trigger
        try:
            spec = PipelineSpec(
                name=spec_name,
                build=fn,
                trigger=None if given is None else parse_duration(given),
                available_now=available_now,
                initial_parallelism=initial_parallelism,
                min_parallelism=min_parallelism,
                max_parallelism=max_parallelism,
                partitions_per_core=partitions_per_core,
                max_rows_per_batch=max_rows_per_batch,
                shuffle_partitions=shuffle_partitions,
                checkpoint=checkpoint,
                manage_rate_limit=manage_rate_limit,
            )
        except ValueError as exc:
            raise PipelineError(f"pipeline {spec_name!r}: trigger: {exc}") from None
        validate_spec(spec)
        with _collect_lock:
            _collected.append(spec)
        fn.pipeline_spec = spec  # type: ignore[attr-defined]
        return fn

    return decorate


# the decorator's arguments by the type they must have (a dataclass does not check them: 2.5 and
# True passed as counts, "no" as a true available_now, and "2" failed deep inside as a TypeError)
_COUNTS = ("min_parallelism", "max_parallelism", "partitions_per_core")
_OPTIONAL_COUNTS = ("initial_parallelism", "max_rows_per_batch", "shuffle_partitions")
_FLAGS = ("available_now", "manage_rate_limit")


def validate_spec(spec: PipelineSpec) -> None:
    if problems := list(_type_problems(spec)):  # the ranges below compare numbers
        raise PipelineError(f"pipeline {spec.name!r}: " + "; ".join(problems))
    problems = []
    if not spec.name or not all(c.isalnum() or c in "-_" for c in spec.name):
        problems.append("name must be non-empty and use letters, digits, '-' or '_'")
    elif len(spec.name.encode()) > MAX_NAME_BYTES:
        problems.append(f"name must be at most {MAX_NAME_BYTES} bytes (it names the query's checkpoint directory)")
    if not _takes_spark_and_ctx(spec.build):
        problems.append("its function must take two arguments, (spark, ctx)")
    elif inspect.iscoroutinefunction(spec.build) or inspect.isgeneratorfunction(spec.build):
        # it returned a coroutine or a generator, not the writer to start: found only at start
        problems.append("its function must be a plain `def` returning the query's DataStreamWriter, not async nor a generator")
    if spec.min_parallelism < 1:
        problems.append("min_parallelism must be at least 1")
    if spec.max_parallelism < spec.min_parallelism:
        problems.append(f"max_parallelism ({spec.max_parallelism}) is below min_parallelism ({spec.min_parallelism})")
    if spec.max_parallelism > JAVA_INT_MAX:
        problems.append(f"max_parallelism must be at most {JAVA_INT_MAX} (Spark counts partitions in a Java int)")
    if spec.initial_parallelism is not None and not spec.min_parallelism <= spec.initial_parallelism <= spec.max_parallelism:
        problems.append("initial_parallelism must lie within [min_parallelism, max_parallelism]")
    if spec.partitions_per_core < 1:
        problems.append("partitions_per_core must be at least 1")
    if spec.trigger is not None and spec.trigger <= timedelta(0):
        # the daemon's query changes carry the trigger on (each must be positive): a 0 one would
        # pass here and refuse every rescale of the query later
        problems.append(f"trigger must be positive, got {spec.trigger.total_seconds():g} s; None runs batches back to back (Spark's default trigger)")
    if spec.max_rows_per_batch is not None and not 1 <= spec.max_rows_per_batch <= JAVA_LONG_MAX:
        problems.append(f"max_rows_per_batch must be at least 1 and at most {JAVA_LONG_MAX} (a Java long)")
    if spec.shuffle_partitions is not None and not 1 <= spec.shuffle_partitions <= JAVA_INT_MAX:
        problems.append(f"shuffle_partitions must be at least 1 and at most {JAVA_INT_MAX} (a Java int)")
    if problems:
        raise PipelineError(f"pipeline {spec.name!r}: " + "; ".join(problems))


def _takes_spark_and_ctx(build: Any) -> bool:
    """Whether ``build(spark, ctx)`` can be called (a builder whose signature cannot be read is
    given the benefit of the doubt)."""
    try:
        inspect.signature(build).bind(None, None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin)
        return True
    return True


def _type_problems(spec: PipelineSpec) -> Iterator[str]:
    if not isinstance(spec.name, str):
        yield f"name must be a string, got {spec.name!r}"
    for key in (*_COUNTS, *_OPTIONAL_COUNTS):
        value = getattr(spec, key)
        if (value is not None or key in _COUNTS) and (isinstance(value, bool) or not isinstance(value, int)):
            yield f"{key} must be a whole number, got {value!r}"
    for key in _FLAGS:
        if not isinstance(value := getattr(spec, key), bool):
            yield f"{key} must be True or False, got {value!r}"
    if spec.checkpoint is not None and (not isinstance(spec.checkpoint, str) or not spec.checkpoint.strip()):
        yield f"checkpoint must be a directory or URI as a non-empty string, got {spec.checkpoint!r}"


def checkpoint_locations(specs: Sequence[PipelineSpec], checkpoint_root: Path | str) -> dict[str, str]:
    """Where each pipeline's query keeps its checkpoint: its ``checkpoint=`` as written, else
    :func:`default_checkpoint`. Two queries writing one checkpoint corrupt it: a place two
    pipelines share, however it is spelled, is refused naming them and the place."""
    if shared := _shared_checkpoints(specs, checkpoint_root):
        raise PipelineError(shared)
    return {spec.name: spec.checkpoint or default_checkpoint(checkpoint_root, spec.name) for spec in specs}


def default_checkpoint(checkpoint_root: Path | str, name: str) -> str:
    """``<checkpoint_root>/<name>``: under a URI root (``s3a://bucket/ck``) the URI, joined with
    one ``/``; under a local root (a ``file:`` URI is one) the absolute path. In the form
    :func:`_checkpoint_key` gives, as the root is."""
    root = _checkpoint_key(str(checkpoint_root))
    return f"{root}/{name}" if is_uri(root) else str(Path(root) / name)


def _shared_checkpoints(specs: Sequence[PipelineSpec], root: Path | str | None) -> str | None:
    """Pipelines on one checkpoint, or None. Without a root only the given ``checkpoint=`` are
    compared; with one, each default (``<root>/<name>``) too."""
    owners: dict[str, list[str]] = {}
    for spec in specs:
        if spec.checkpoint is not None:
            owners.setdefault(_checkpoint_key(spec.checkpoint), []).append(spec.name)
        elif root is not None:
            owners.setdefault(default_checkpoint(root, spec.name), []).append(spec.name)
    shared = []
    for where, names in owners.items():
        if len(names) > 1:
            # names are unique, so at most one of them is there by default
            default = "".join(f" ({s.name}'s by default: pipelines.checkpoint_root/{s.name})"
                              for s in specs if s.name in names and s.checkpoint is None)
            shared.append(f"{', '.join(names)} share the checkpoint {where!r}{default}")
    # one checkpoint inside another: the outer query's checkpoint holds the inner one's files
    # among its own (offsets/, commits/, state/: a pipeline named "offsets" would write its log)
    for outer in owners:
        for inner in owners:
            if inner.startswith(outer.rstrip("/") + "/"):
                shared.append(f"{owners[inner][0]}'s checkpoint {inner!r} is inside {owners[outer][0]}'s {outer!r}")
    return "; ".join(shared) or None


def _checkpoint_key(checkpoint: str) -> str:
    # a URI (s3a://, hdfs://) as text without trailing slashes, a local directory as an absolute
    # path ("ck", "./ck/", "file:///w/ck" and "/w/ck" are one)
    return uri_key(checkpoint) if is_uri(checkpoint) else str(local_path(checkpoint).resolve())


def _pickle_by_value(module: ModuleType) -> None:
    """Ship the code of a file-loaded module with the functions that use it.

    The file is imported under a name no executor can import (``spark_autoscaler_pipelines_<stem>``;
    on Kubernetes the file is mounted into the driver pod only). cloudpickle pickles a function
    of an importable module by reference, so a Python UDF defined in the file would fail on the
    executors with ``ModuleNotFoundError``; registered, its functions travel by value
    (``tests/integration/test_file_pipelines.py``). A dotted module comes from the image and is
    importable everywhere: it stays pickled by reference.
    """
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)


def _exec_beside_its_siblings(loader: Any, mod: ModuleType, directory: Path) -> None:
    """Run a pipeline file as ``python file.py`` would: its directory first on ``sys.path``, so
    ``import helpers`` finds the ``helpers.py`` beside it (it failed with ModuleNotFoundError).
    Such modules are no more on the executors than the file is: pickled by value too, whether
    imported while the file runs or later by a builder (:class:`_ShipsSiblings`).

    Once the file has run, its directory moves to the end of ``sys.path``: a builder's later
    ``import helpers`` still finds the file's siblings, but a ``wave.py`` or ``kubernetes.py``
    beside the file no longer takes the place of a module the daemon imports later."""
    _SHIPS_SIBLINGS.directories.add(directory)
    if _SHIPS_SIBLINGS not in sys.meta_path:
        # just before the path finder (a class in sys.meta_path), after those before it (editable installs)
        path_finder = importlib.machinery.PathFinder
        at = sys.meta_path.index(path_finder) if path_finder in sys.meta_path else len(sys.meta_path)
        sys.meta_path.insert(at, _SHIPS_SIBLINGS)
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        loader.exec_module(mod)
    finally:
        sys.path.remove(entry)  # the first one: ours
        if entry not in sys.path:
            sys.path.append(entry)


class _ShipsSiblings(importlib.abc.MetaPathFinder):
    """Finds a module as the import system's path finder would and, when it is a source file of
    a pipeline file's directory, has it pickled by value as it is imported. A helper a builder
    imports (``from helpers import f`` inside it, after the file has run) was registered by no
    one, and a UDF calling it failed on the executors with ModuleNotFoundError
    (``tests/integration/test_file_pipelines.py``). One finder for every directory: an import
    looks the module up once more, however many files were loaded."""

    def __init__(self) -> None:
        self.directories: set[Path] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or spec.origin is None:
            return None  # nothing cloudpickle could ship (an extension module, a namespace package)
        if not self._beside_the_file(fullname, Path(spec.origin)):
            return None
        spec.loader = _SourceShippedByValue(fullname, spec.origin)
        return spec

    def _beside_the_file(self, fullname: str, origin: Path) -> bool:
        """``helpers.py`` or ``helpers/...`` right in a directory, found through its entry on
        ``sys.path``: not a package installed somewhere under it (a ``.venv`` beside the file)."""
        top = fullname.partition(".")[0]
        return any(origin.is_relative_to(d) and origin.relative_to(d).parts[0] in (top, f"{top}.py") for d in tuple(self.directories))


class _SourceShippedByValue(importlib.machinery.SourceFileLoader):
    def exec_module(self, module: ModuleType) -> None:
        _pickle_by_value(module)  # in sys.modules already: a UDF made as it runs travels too
        super().exec_module(module)


_SHIPS_SIBLINGS = _ShipsSiblings()


def _beside_its_file(spec: PipelineSpec, directory: Path) -> PipelineSpec:
    """A relative local ``checkpoint=`` of a pipeline file made relative to the file, as a
    relative path in the configuration file is to that file: relative to the working directory
    (Spark's reading of a checkpointLocation), a daemon started from another directory ran
    every query from nothing in another checkpoint. One left under the working directory, where
    it was read until 2026-12-02, is refused (:func:`moved_checkpoints`)."""
    if spec.checkpoint is None or is_uri(spec.checkpoint) or (written := local_path(spec.checkpoint)).is_absolute():
        return spec
    anchored, under_cwd = (directory / written).resolve(), written.resolve()
    if problem := moved_checkpoints(f"pipeline {spec.name!r}: checkpoint", "the pipeline file", spec.checkpoint, anchored, under_cwd):
        raise PipelineError(problem)
    return replace(spec, checkpoint=str(anchored))


def load_pipelines(module: str, only: list[str] | None = None, *, checkpoint_root: Path | str | None = None) -> list[PipelineSpec]:
    """Import a pipeline module (a ``.py`` file or a dotted name) and return its pipelines.

    Two of its pipelines on one checkpoint are refused: two given the same ``checkpoint=``, and,
    given the ``checkpoint_root`` they will run under, one given another's default. A relative
    ``checkpoint=`` in a ``.py`` file is relative to the file; in a dotted module (installed
    code) to the working directory, as Spark reads it.
    """
    with _collect_lock:
        _collected.clear()
    directory: Path | None = None  # a file's, where its relative checkpoint= are
    try:
        if module.endswith(".py") or "/" in module:
            path = Path(module).resolve()
            directory = path.parent
            if problem := file_problem(path):
                raise PipelineError(f"pipeline module {module!r} {problem}")
            mod_name = f"spark_autoscaler_pipelines_{path.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            if spec is None or spec.loader is None:
                raise PipelineError(f"pipeline module {module!r} cannot be loaded")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = mod
            _pickle_by_value(mod)
            _exec_beside_its_siblings(spec.loader, mod, directory)
        elif module in sys.modules:
            importlib.reload(sys.modules[module])
        else:
            importlib.import_module(module)
    except PipelineError:
        raise
    except SystemExit as exc:  # a module that exits on import must not end the daemon silently
        raise PipelineError(f"pipeline module {module!r} called sys.exit({exc.code!r}) while being imported") from exc
    except Exception as exc:
        raise PipelineError(f"pipeline module {module!r} failed to import: {type(exc).__name__}: {exc}") from exc
    with _collect_lock:
        specs = list(_collected)
        _collected.clear()
    if not specs:
        raise PipelineError(f"pipeline module {module!r} defines no @pipeline")
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PipelineError(f"pipeline module {module!r} defines {', '.join(duplicates)} more than once")
    if directory is not None:
        specs = [_beside_its_file(spec, directory) for spec in specs]
    if shared := _shared_checkpoints(specs, checkpoint_root):
        raise PipelineError(f"pipeline module {module!r}: {shared}")
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise PipelineError(f"pipelines {', '.join(unknown)} not found in {module!r}; it defines {', '.join(names)}")
        specs = [s for s in specs if s.name in only]
    return specs
