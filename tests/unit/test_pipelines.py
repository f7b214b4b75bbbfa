import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.spark.pipelines import PipelineError, PipelineSpec, checkpoint_locations, load_pipelines


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_module_pipelines_are_loaded_with_their_declarations(tmp_path):
    module = write(
        tmp_path,
        "p.py",
        "from autoscaler import pipeline\n"
        "@pipeline('a', trigger='5s', max_parallelism=16, partitions_per_core=2)\n"
        "def a(spark, ctx): pass\n"
        "@pipeline(available_now=True)\n"
        "def b(spark, ctx): pass\n",
    )
    a, b = load_pipelines(module)
    assert (a.name, a.trigger, a.max_parallelism, a.partitions_per_core) == ("a", timedelta(seconds=5), 16, 2)
    assert load_pipelines(write(tmp_path, "d.py", "from autoscaler import pipeline\n@pipeline()\ndef d(s, c): pass\n"))[0].trigger == timedelta(seconds=2)
    assert b.name == "b" and b.available_now and b.initial_params(4).trigger_interval is None
    assert a.initial_params(3).parallelism == 6  # two partitions per core on 3 cores
    assert [s.name for s in load_pipelines(module, only=["b"])] == ["b"]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("x = 1\n", "defines no @pipeline", id="no-pipelines"),
        pytest.param("raise ValueError('boom')\n", "failed to import: ValueError: boom", id="import-error"),
        pytest.param("import sys\nsys.exit(3)\n", "called sys.exit(3) while being imported", id="exits-on-import"),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a')\ndef a(s, c): pass\n@pipeline('a')\ndef b(s, c): pass\n",
            "defines a more than once",
            id="duplicate-names",
        ),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', min_parallelism=8, max_parallelism=2)\ndef a(s, c): pass\n",
            "pipeline 'a': max_parallelism (2) is below min_parallelism (8)",
            id="bad-bounds",
        ),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a b')\ndef a(s, c): pass\n", "name must be non-empty", id="bad-name"
        ),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', trigger='soon')\ndef a(s, c): pass\n", "pipeline 'a': trigger", id="bad-trigger"
        ),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', available_now=True, trigger='1s')\ndef a(s, c): pass\n",
            "pipeline 'a': trigger does not apply to an available_now pipeline",
            id="trigger-on-a-bounded-pipeline",
        ),
        # passed `run --check`, then every REST change of the query was refused for a trigger it never sent
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', trigger='0s')\ndef a(s, c): pass\n",
            r"pipeline 'a': trigger must be positive, got 0 s; None runs batches back to back",
            id="zero-trigger",
        ),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', max_rows_per_batch=2**63)\ndef a(s, c): pass\n",
            "pipeline 'a': max_rows_per_batch must be at least 1 and at most 9223372036854775807 (a Java long)",
            id="rate-limit-beyond-a-java-long",
        ),
        # the decorator's arguments of the wrong type passed `run --check` (or failed as a TypeError)
        *[
            pytest.param(f"from autoscaler import pipeline\n@pipeline('a', {argument})\ndef a(s, c): pass\n", f"pipeline 'a': {problem}", id=case)
            for case, argument, problem in [
                ("fractional-parallelism", "max_parallelism=2.5", "max_parallelism must be a whole number, got 2.5"),
                ("boolean-parallelism", "max_parallelism=True", "max_parallelism must be a whole number, got True"),
                ("parallelism-beyond-a-java-int", "max_parallelism=10**20", "max_parallelism must be at most 2147483647"),
                ("text-parallelism", "min_parallelism='2'", "min_parallelism must be a whole number, got '2'"),
                ("fractional-rate-limit", "max_rows_per_batch=2.5", "max_rows_per_batch must be a whole number, got 2.5"),
                ("shuffle-beyond-a-java-int", "shuffle_partitions=2**31", "shuffle_partitions must be at least 1 and at most 2147483647"),
                ("text-flag", "available_now='no'", "available_now must be True or False, got 'no'"),
                ("numeric-flag", "manage_rate_limit=1", "manage_rate_limit must be True or False, got 1"),
                ("numeric-checkpoint", "checkpoint=5", "checkpoint must be a directory or URI as a non-empty string, got 5"),
                ("empty-checkpoint", "checkpoint=''", "checkpoint must be a directory or URI as a non-empty string, got ''"),
            ]
        ],
        # an empty name was replaced by the function's; a long one broke the checkpoint's directory;
        # a function without (spark, ctx) passed `run --check` and failed once Spark had started
        pytest.param("from autoscaler import pipeline\n@pipeline('')\ndef a(s, c): pass\n",
                     "pipeline '': name must be non-empty", id="empty-name"),
        pytest.param("from autoscaler import pipeline\n@pipeline('" + "n" * 201 + "')\ndef a(s, c): pass\n",
                     "name must be at most 200 bytes (it names the query's checkpoint directory)", id="name-too-long"),
        pytest.param("from autoscaler import pipeline\n@pipeline('a')\ndef a(): pass\n",
                     "pipeline 'a': its function must take two arguments, (spark, ctx)", id="builder-without-arguments"),
        # accepted, and the query failed at start on a coroutine where its writer belonged
        pytest.param("from autoscaler import pipeline\n@pipeline('a')\nasync def a(s, c): pass\n",
                     "pipeline 'a': its function must be a plain `def` returning the query's DataStreamWriter, not async nor a generator", id="async-builder"),
        pytest.param("from autoscaler import pipeline\n@pipeline('a')\ndef a(s, c):\n    yield 1\n",
                     "pipeline 'a': its function must be a plain `def`", id="generator-builder"),
        pytest.param(
            "from autoscaler import pipeline\n@pipeline('a', checkpoint='ck')\ndef a(s, c): pass\n"
            "@pipeline('b', checkpoint='./ck/')\ndef b(s, c): pass\n@pipeline('c', checkpoint='s3a://x/c')\ndef c(s, c): pass\n",
            "a, b share the checkpoint",
            id="one-checkpoint-for-two-pipelines",
        ),
    ],
)
def test_bad_pipeline_modules_name_the_problem(tmp_path, text, message):
    with pytest.raises(PipelineError, match=re.escape(message)):
        load_pipelines(write(tmp_path, "bad.py", text))


def two_pipelines(tmp_path, checkpoint):
    """a given ``checkpoint``, b on its default (``<checkpoint_root>/b``)."""
    return write(tmp_path, "p.py", f"from autoscaler import pipeline\n@pipeline('a', checkpoint={checkpoint!r})\ndef a(s, c): pass\n"
                                   "@pipeline('b')\ndef b(s, c): pass\n")


@pytest.mark.parametrize(
    "root, checkpoint",
    [
        pytest.param("{tmp}/checkpoints", "{tmp}/checkpoints/b", id="both-absolute"),
        pytest.param("checkpoints", "{tmp}/checkpoints/b", id="relative-root-absolute-checkpoint"),
        pytest.param("{tmp}/checkpoints", "checkpoints/b", id="absolute-root-relative-checkpoint"),
        pytest.param("{tmp}/checkpoints", "./checkpoints/b/", id="trailing-slash"),
        pytest.param("./checkpoints/", "{tmp}/checkpoints/x/../b", id="dot-dot"),
        pytest.param("{tmp}/checkpoints", "file://{tmp}/checkpoints/b", id="file-uri"),
    ],
)
def test_a_checkpoint_equal_to_another_pipelines_default_is_refused_naming_both_and_the_path(tmp_path, monkeypatch, root, checkpoint):
    # two queries would write one checkpoint: a's explicit one was b's default, and only explicit ones were compared
    monkeypatch.chdir(tmp_path)
    module = two_pipelines(tmp_path, checkpoint.format(tmp=tmp_path))
    where = str(tmp_path / "checkpoints" / "b")
    with pytest.raises(PipelineError) as info:
        load_pipelines(module, checkpoint_root=Path(root.format(tmp=tmp_path)))
    assert str(info.value) == (f"pipeline module {module!r}: a, b share the checkpoint {where!r} "
                               "(b's by default: pipelines.checkpoint_root/b)")


def test_the_same_specs_are_refused_wherever_they_are_run(tmp_path):
    # attach() and the daemon's own QueryHost take specs that no module loading checked
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=str(tmp_path / "b")), PipelineSpec("b", lambda s, c: None)]
    with pytest.raises(PipelineError, match=re.escape(f"a, b share the checkpoint {str(tmp_path / 'b')!r}")):
        checkpoint_locations(specs, tmp_path)


def test_each_pipeline_has_its_own_checkpoint_and_a_default_one_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = two_pipelines(tmp_path, "checkpoints/a")  # a's own default, spelled out
    specs = load_pipelines(module, checkpoint_root=Path("checkpoints"))
    assert checkpoint_locations(specs, Path("checkpoints")) == {"a": str(tmp_path / "checkpoints" / "a"), "b": str(tmp_path / "checkpoints" / "b")}
    assert [s.name for s in load_pipelines(two_pipelines(tmp_path, "s3a://bucket/b"), checkpoint_root=Path("checkpoints"))] == ["a", "b"]


@pytest.mark.parametrize("checkpoint", ["ck/a", "./ck/a/", "file:ck/a"])
def test_a_relative_checkpoint_in_a_pipeline_file_is_relative_to_the_file(tmp_path, monkeypatch, checkpoint):
    # it was relative to the working directory: a daemon started from another directory ran the
    # query from nothing in another checkpoint (as a relative checkpoint_root in the configuration file did)
    pipes, elsewhere = tmp_path / "pipes", tmp_path / "elsewhere"
    pipes.mkdir(), elsewhere.mkdir()
    module = two_pipelines(pipes, checkpoint)
    monkeypatch.chdir(elsewhere)
    specs = load_pipelines(module, checkpoint_root="s3a://bucket/ck")
    assert checkpoint_locations(specs, "s3a://bucket/ck") == {"a": str(pipes / "ck" / "a"), "b": "s3a://bucket/ck/b"}
    assert list(elsewhere.iterdir()) == []


def test_a_relative_checkpoint_of_a_dotted_module_stays_relative_to_the_working_directory(tmp_path, monkeypatch):
    # installed code: its directory (site-packages, an image's) is no place for state
    (tmp_path / "dotted_pipes.py").write_text("from autoscaler import pipeline\n@pipeline('a', checkpoint='ck/a')\ndef a(s, c): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "dotted_pipes", raising=False)
    assert [s.checkpoint for s in load_pipelines("dotted_pipes")] == ["ck/a"]


def test_a_checkpoint_left_under_the_working_directory_is_not_left_behind(tmp_path, monkeypatch):
    # until 2026-12-02 a relative checkpoint= was read from the working directory: taking the
    # file's would restart the query there without its offsets and state
    pipes, run_dir = tmp_path / "pipes", tmp_path / "run"
    pipes.mkdir()
    (run_dir / "ck" / "a" / "offsets").mkdir(parents=True)
    module = two_pipelines(pipes, "ck/a")
    monkeypatch.chdir(run_dir)
    with pytest.raises(PipelineError) as info:
        load_pipelines(module)
    assert str(info.value) == (
        f"pipeline 'a': checkpoint: 'ck/a' is relative to the pipeline file ({pipes / 'ck' / 'a'}), but the checkpoints are under "
        f"the working directory ({run_dir / 'ck' / 'a'}), where a relative one was read before: move them, or write {str(run_dir / 'ck' / 'a')!r}")
    (pipes / "ck" / "a").mkdir(parents=True)  # moved (or begun) beside the file: that one is used
    assert load_pipelines(module)[0].checkpoint == str(pipes / "ck" / "a")
    (pipes / "ck" / "a").rmdir()
    monkeypatch.chdir(pipes)  # started from the file's directory: one place, as before
    assert load_pipelines(module)[0].checkpoint == str(pipes / "ck" / "a")


@pytest.mark.parametrize(
    "root, b",
    [
        pytest.param("s3a://bucket/ck", "s3a://bucket/ck/b", id="s3a"),
        pytest.param("s3a://bucket/ck//", "s3a://bucket/ck/b", id="trailing-slashes"),
        pytest.param("gs://bucket", "gs://bucket/b", id="bucket-only"),
        pytest.param("hdfs://namenode:8020/checkpoints", "hdfs://namenode:8020/checkpoints/b", id="hdfs"),
        pytest.param("hdfs:///checkpoints", "hdfs:///checkpoints/b", id="default-namenode"),
        pytest.param("hdfs:/checkpoints/", "hdfs:/checkpoints/b", id="default-namenode-one-slash"),
        pytest.param("hdfs:///", "hdfs:///b", id="namenode-root"),
        pytest.param("abfss://ck@account.dfs.core.windows.net/apps/", "abfss://ck@account.dfs.core.windows.net/apps/b", id="abfss"),
    ],
)
def test_a_default_checkpoint_under_a_uri_root_is_a_uri(tmp_path, monkeypatch, root, b):
    # Path(root).resolve() made s3a://bucket/ck <cwd>/s3a:/bucket/ck: every default checkpoint on the driver's own disk
    monkeypatch.chdir(tmp_path)
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint="/elsewhere/a"), PipelineSpec("b", lambda s, c: None)]
    assert checkpoint_locations(specs, root) == {"a": "/elsewhere/a", "b": b}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("checkpoint", ["s3a://bucket/ck/b/", "s3a://bucket/ck/b"])
def test_a_checkpoint_equal_to_another_pipelines_default_under_a_uri_root_is_refused(tmp_path, checkpoint):
    # compared as text, trailing slashes ignored: b's default was a local path, so the two never met
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=checkpoint), PipelineSpec("b", lambda s, c: None)]
    shared = "a, b share the checkpoint 's3a://bucket/ck/b' (b's by default: pipelines.checkpoint_root/b)"
    with pytest.raises(PipelineError) as info:
        checkpoint_locations(specs, "s3a://bucket/ck/")
    assert str(info.value) == shared
    module = two_pipelines(tmp_path, checkpoint)
    with pytest.raises(PipelineError) as info:
        load_pipelines(module, checkpoint_root="s3a://bucket/ck")
    assert str(info.value) == f"pipeline module {module!r}: {shared}"
    # another bucket, or the same path on another file system, is another place
    other = [PipelineSpec("a", lambda s, c: None, checkpoint="s3a://other/ck/b"), PipelineSpec("b", lambda s, c: None)]
    assert checkpoint_locations(other, "s3a://bucket/ck")["b"] == "s3a://bucket/ck/b"
    assert checkpoint_locations(specs, tmp_path / "s3a:" / "bucket" / "ck")["b"] == str(tmp_path / "s3a:" / "bucket" / "ck" / "b")


def test_a_local_root_given_as_a_file_uri_is_its_directory(tmp_path):
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=str(tmp_path / "ck" / "b")), PipelineSpec("b", lambda s, c: None)]
    with pytest.raises(PipelineError, match=re.escape(f"a, b share the checkpoint {str(tmp_path / 'ck' / 'b')!r}")):
        checkpoint_locations(specs, f"file://{tmp_path}/ck")
    assert checkpoint_locations(specs[1:], f"file://{tmp_path}/ck") == {"b": str(tmp_path / "ck" / "b")}


def test_selecting_an_unknown_pipeline_lists_the_known_ones(tmp_path):
    module = write(tmp_path, "p.py", "from autoscaler import pipeline\n@pipeline('a')\ndef a(s, c): pass\n")
    with pytest.raises(PipelineError, match="pipelines zz not found .*; it defines a"):
        load_pipelines(module, only=["zz"])


def test_a_pipeline_file_imports_the_modules_beside_it_and_ships_them(tmp_path):
    # as `python pipelines.py` would; it failed with ModuleNotFoundError: no module named 'sibling_helpers_1'
    from pyspark.cloudpickle import cloudpickle

    write(tmp_path, "sibling_helpers_1.py", "def scale(n):\n    return n * 10\n")
    module = write(tmp_path, "p.py", "from autoscaler import pipeline\nfrom sibling_helpers_1 import scale\n"
                                     "@pipeline('a')\ndef a(spark, ctx): return scale(1)\n")
    [spec] = load_pipelines(module)
    assert spec.build(None, None) == 10
    # the executors have the file no more than its siblings: their code travels with the UDFs
    import sibling_helpers_1

    assert cloudpickle._is_registered_pickle_by_value(sibling_helpers_1)
    assert not cloudpickle._is_registered_pickle_by_value(pytest)  # imported before: not the file's


def test_a_module_a_builder_imports_from_beside_its_file_is_shipped_too(tmp_path, monkeypatch):
    # imported once the file has run (inside the builder), it was registered by no one: a UDF
    # calling it failed on the executors (tests/integration/test_file_pipelines.py on real Spark)
    from pyspark.cloudpickle import cloudpickle

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    for name in ("lazy_helpers_1", "lazy_pkg_1", "lazy_pkg_1.inner"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    write(tmp_path, "lazy_helpers_1.py", "def scale(n):\n    return n * 10\n")
    (tmp_path / "lazy_pkg_1").mkdir()
    write(tmp_path / "lazy_pkg_1", "__init__.py", "")
    write(tmp_path / "lazy_pkg_1", "inner.py", "def one():\n    return 1\n")
    module = write(tmp_path, "p.py", "from autoscaler import pipeline\n@pipeline('a')\ndef a(spark, ctx):\n"
                                     "    from lazy_helpers_1 import scale\n    from lazy_pkg_1.inner import one\n    return scale(one())\n")
    [spec] = load_pipelines(module)
    assert "lazy_helpers_1" not in sys.modules
    assert spec.build(None, None) == 10
    for name in ("lazy_helpers_1", "lazy_pkg_1", "lazy_pkg_1.inner"):
        assert cloudpickle._is_registered_pickle_by_value(sys.modules[name]), name
    # not a package installed under the file's directory (a virtual environment beside it)
    site = tmp_path / ".venv" / "site-packages"
    site.mkdir(parents=True)
    write(site, "installed_pkg_1.py", "X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "installed_pkg_1", raising=False)
    import installed_pkg_1

    assert not cloudpickle._is_registered_pickle_by_value(installed_pkg_1)
    load_pipelines(module)  # loaded again: still one finder, for every file's directory
    assert sum(type(f).__name__ == "_ShipsSiblings" for f in sys.meta_path) == 1


def test_a_module_beside_a_pipeline_file_does_not_replace_one_the_daemon_imports_later(tmp_path, monkeypatch):
    # the file's directory stayed first on sys.path: the daemon's later `import wave` (a standard
    # module not imported yet) ran the wave.py beside the pipeline file
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "wave", raising=False)
    monkeypatch.delitem(sys.modules, "sibling_helpers_2", raising=False)
    write(tmp_path, "wave.py", "raise RuntimeError('the pipeline directory shadowed the standard wave module')\n")
    write(tmp_path, "sibling_helpers_2.py", "def scale(n):\n    return n * 10\n")
    module = write(tmp_path, "p.py", "from autoscaler import pipeline\n"
                                     "@pipeline('a')\ndef a(spark, ctx):\n    from sibling_helpers_2 import scale\n    return scale(2)\n")
    [spec] = load_pipelines(module)
    import wave

    assert not Path(wave.__file__).is_relative_to(tmp_path)
    assert spec.build(None, None) == 20  # a builder's own import still finds the file's siblings
    assert sys.path.count(str(tmp_path)) == 1
    load_pipelines(module)
    assert sys.path.count(str(tmp_path)) == 1 and sys.path[-1] == str(tmp_path)


def test_missing_module_file(tmp_path):
    with pytest.raises(PipelineError, match="does not exist"):
        load_pipelines(str(tmp_path / "nope.py"))


def test_initial_parallelism_is_aligned_and_bounded():
    spec = PipelineSpec("x", lambda s, c: None, min_parallelism=2, max_parallelism=8)
    assert [spec.initial_params(c).parallelism for c in (1, 3, 20)] == [2, 3, 8]


@pytest.mark.parametrize(
    "checkpoints, message",
    [
        pytest.param({"a": "{tmp}/ck", "b": None}, "b's checkpoint '{tmp}/ck/b' is inside a's '{tmp}/ck'", id="the-root-itself"),
        pytest.param({"a": "{tmp}/x", "b": "{tmp}/x/state/b"}, "b's checkpoint '{tmp}/x/state/b' is inside a's '{tmp}/x'", id="explicit"),
        # "/ck/a-b" sorts between "/ck/a" and "/ck/a/x": nesting is not only between neighbours
        pytest.param({"a": "{tmp}/ck/a", "b": "{tmp}/ck/a-b", "c": "{tmp}/ck/a/x"}, "c's checkpoint '{tmp}/ck/a/x' is inside a's '{tmp}/ck/a'",
                     id="not-neighbours-when-sorted"),
        pytest.param({"a": "s3a://bucket/ck", "b": "s3a://bucket/ck/b/x/"}, "b's checkpoint 's3a://bucket/ck/b/x' is inside a's 's3a://bucket/ck'", id="uri"),
    ],
)
def test_a_checkpoint_inside_another_is_refused_naming_both(tmp_path, checkpoints, message):
    # the outer query's checkpoint directory held the inner one's files among its own offsets/,
    # commits/ and state/ (a pipeline named "offsets" under a root another pipeline used)
    specs = [PipelineSpec(name, lambda s, c: None, checkpoint=None if ck is None else ck.format(tmp=tmp_path)) for name, ck in checkpoints.items()]
    with pytest.raises(PipelineError, match=re.escape(message.format(tmp=tmp_path))):
        checkpoint_locations(specs, tmp_path / "ck")


def test_checkpoints_side_by_side_with_a_common_prefix_are_not_nested(tmp_path):
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=str(tmp_path / "ck" / "a")),
             PipelineSpec("b", lambda s, c: None, checkpoint=str(tmp_path / "ck" / "ab")),
             PipelineSpec("c", lambda s, c: None, checkpoint="s3a://bucket/ck-2"), PipelineSpec("d", lambda s, c: None, checkpoint="s3a://bucket/ck")]
    assert checkpoint_locations(specs, tmp_path / "ck")["b"] == str(tmp_path / "ck" / "ab")
