import re
from types import SimpleNamespace

import pytest

from autoscaler.spark.checkpoint import CheckpointInfo, CheckpointUnreadable, hadoop_files, read_checkpoint, remove_offsets_after
from tests.checkpoints import MemoryFiles, make_checkpoint


def test_reads_pinned_confs_and_batch_ids(tmp_path):
    conf = {
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    }
    make_checkpoint(tmp_path, [0, 1, 2], [0, 1], conf, state=True)
    info = read_checkpoint(tmp_path)
    assert (info.last_offset, info.last_commit, info.clean) == (2, 1, False)
    assert (info.shuffle_partitions, info.stateful, info.state_store) == (4, True, "rocksdb")


def test_default_state_store_and_stateless(tmp_path):
    make_checkpoint(tmp_path / "a", [0], [0], {"spark.sql.shuffle.partitions": "8"}, state=True)
    make_checkpoint(tmp_path / "b", [0], [0])
    assert read_checkpoint(tmp_path / "a").state_store == "hdfs"
    assert read_checkpoint(tmp_path / "b").state_store is None and read_checkpoint(tmp_path / "b").clean
    assert not read_checkpoint(tmp_path / "missing").exists


def test_reads_each_sources_end_offset_of_the_last_planned_batch(tmp_path):
    # a JSON offset per source; a source with no new data writes "-" (Spark's OffsetSeq)
    make_checkpoint(tmp_path, [0, 1], [0, 1], sources=('{"row":1234}', "-", '{"topic":{"0":17}}'))
    assert read_checkpoint(tmp_path).source_offsets == ({"row": 1234}, "-", {"topic": {"0": 17}})
    make_checkpoint(tmp_path / "none", [], [])
    assert read_checkpoint(tmp_path / "none").source_offsets == ()


def test_dangling_offsets_after_a_failed_repartition_are_removed_with_their_crc(tmp_path):
    make_checkpoint(tmp_path, [0, 1, 2], [0, 1])
    assert remove_offsets_after(tmp_path, 1) == [2]
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [".0.crc", ".1.crc", "0", "1"]


def leftover(tmp_path, monkeypatch, location):
    # Path('s3a://bucket/ck/q') is <cwd>/s3a:/bucket/ck/q: the local leftover of a daemon that put its
    # default checkpoints there must never be read as the query's checkpoint, nor its offsets deleted
    monkeypatch.chdir(tmp_path)
    local = tmp_path / location.replace("://", ":/").rstrip("/")
    make_checkpoint(local, [0, 1, 2], [0, 1], {"spark.sql.shuffle.partitions": "4"})
    return local


@pytest.mark.parametrize("location", ["s3a://bucket/ck/q", "gs://bucket/ck/q/", "hdfs://namenode:8020/ck/q"])
def test_a_remote_checkpoint_without_a_hadoop_file_system_is_unreadable_not_missing(tmp_path, monkeypatch, location):
    # it read as missing (exists=False): a stateful query's pinned shuffle partitions and state store
    # unknown, so a change the checkpoint cannot honour went ahead; and "nothing removed" hid a
    # dangling offsets/N that fails the next start
    local = leftover(tmp_path, monkeypatch, location)
    why = f"checkpoint {location} could not be read: it is on remote storage, read only through a Spark session's Hadoop file system"
    with pytest.raises(CheckpointUnreadable, match=re.escape(why)):
        read_checkpoint(location)
    with pytest.raises(CheckpointUnreadable, match=re.escape(why)):
        remove_offsets_after(location, 0)
    assert sorted(p.name for p in (local / "offsets").iterdir()) == [".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]


def test_a_remote_checkpoint_is_read_and_cleaned_through_the_file_system_given(tmp_path, monkeypatch):
    # remote checkpoints were never read: the pinned shuffle partitions, the RocksDB state store and
    # the last committed batch came back as unknown, and a dangling offsets/N stayed
    conf = {"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.stateStore.providerClass": "o.a.s.RocksDBStateStoreProvider"}
    make_checkpoint(tmp_path / "same", [0, 1, 2], [0, 1], conf, state=True)
    (tmp_path / "same" / "state" / "0" / "0").mkdir()
    (tmp_path / "same" / "state" / "0" / "0" / "1.changelog").write_text("x")
    local = leftover(tmp_path, monkeypatch, "s3a://bucket/ck/q")
    remote = MemoryFiles.of("s3a://bucket/ck/q", tmp_path / "same")
    opened = []

    def hadoop(location):
        opened.append(location)
        return remote

    info = read_checkpoint("s3a://bucket/ck/q", hadoop=hadoop)
    assert info == read_checkpoint(tmp_path / "same")
    assert (info.last_offset, info.last_commit, info.shuffle_partitions, info.state_store) == (2, 1, 4, "rocksdb")
    assert remove_offsets_after("s3a://bucket/ck/q", 1, hadoop=hadoop) == [2]
    assert remote.names("offsets") == [".0.crc", ".1.crc", "0", "1"]
    assert read_checkpoint("s3a://bucket/ck/q", hadoop=hadoop).clean
    assert read_checkpoint("s3a://bucket/ck/other", hadoop=lambda location: MemoryFiles(location)) == CheckpointInfo(exists=False)
    assert opened == ["s3a://bucket/ck/q"] * 3
    assert sorted(p.name for p in (local / "offsets").iterdir()) == [".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]  # untouched
    assert read_checkpoint(tmp_path / "same", hadoop=hadoop) == info and opened == ["s3a://bucket/ck/q"] * 3  # a path: the disk


class _JavaError(Exception):
    """What py4j raises for an exception in the JVM (a Py4JJavaError): the Java exception attached."""

    def __init__(self, text):
        super().__init__("An error occurred while calling o42.getFileSystem.\n" + text + "\n\tat org.apache.hadoop...")
        self.java_exception = SimpleNamespace(toString=lambda: text)


def fake_jvm_spark(error):
    def get_file_system(conf):
        raise error

    path = SimpleNamespace(getFileSystem=get_file_system)
    jvm = SimpleNamespace(
        org=SimpleNamespace(apache=SimpleNamespace(hadoop=SimpleNamespace(fs=SimpleNamespace(Path=lambda *a: path)))),
        java=SimpleNamespace(lang=SimpleNamespace(Class=SimpleNamespace(forName=lambda name: SimpleNamespace(isInstance=lambda e: False)))),
    )
    session = SimpleNamespace(sessionState=lambda: SimpleNamespace(newHadoopConf=lambda: "conf"))
    return SimpleNamespace(_jvm=jvm, _jsparkSession=session)


@pytest.mark.parametrize(
    "spark, reason",
    [
        pytest.param(fake_jvm_spark(_JavaError("java.nio.file.AccessDeniedException: s3a://bucket/ck/q: getFileStatus: 403 Forbidden")),
                     "java.nio.file.AccessDeniedException: s3a://bucket/ck/q: getFileStatus: 403 Forbidden", id="refused-by-the-storage"),
        pytest.param(fake_jvm_spark(_JavaError('org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3a"')),
                     'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3a"', id="no-file-system-for-the-scheme"),
        pytest.param(object(), "AttributeError: 'object' object has no attribute '_jvm'", id="no-jvm (Spark Connect)"),
    ],
)
def test_a_checkpoint_hadoop_cannot_reach_is_unreadable_with_the_jvms_reason(spark, reason):
    with pytest.raises(CheckpointUnreadable) as raised:
        read_checkpoint("s3a://bucket/ck/q", hadoop=hadoop_files(spark))
    assert str(raised.value) == f"checkpoint s3a://bucket/ck/q could not be read: {reason}"
    with pytest.raises(CheckpointUnreadable, match=re.escape(reason)):
        remove_offsets_after("s3a://bucket/ck/q", 0, hadoop=hadoop_files(spark))


def test_a_file_uri_checkpoint_is_read_from_its_directory(tmp_path):
    make_checkpoint(tmp_path / "q", [0, 1], [0])
    for location in (f"file://{tmp_path}/q", f"file:{tmp_path}/q"):
        assert (read_checkpoint(location).last_offset, read_checkpoint(location).last_commit) == (1, 0)
