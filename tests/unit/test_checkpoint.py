import json

import pytest

from autoscaler.spark.checkpoint import CheckpointInfo, read_checkpoint, remove_offsets_after


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


@pytest.mark.parametrize("location", ["s3a://bucket/ck/q", "gs://bucket/ck/q/", "hdfs://namenode:8020/ck/q"])
def test_a_remote_checkpoint_is_never_read_or_changed_on_the_local_disk(tmp_path, monkeypatch, location):
    # Path('s3a://bucket/ck/q') is <cwd>/s3a:/bucket/ck/q: the local leftover of a daemon that put its
    # default checkpoints there was read as the query's checkpoint, and its offsets deleted
    monkeypatch.chdir(tmp_path)
    local = tmp_path / location.replace("://", ":/").rstrip("/")
    make_checkpoint(local, [0, 1, 2], [0, 1], {"spark.sql.shuffle.partitions": "4"})
    assert read_checkpoint(location) == CheckpointInfo(exists=False)
    assert remove_offsets_after(location, 0) == []
    assert sorted(p.name for p in (local / "offsets").iterdir()) == [".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]


def test_a_file_uri_checkpoint_is_read_from_its_directory(tmp_path):
    make_checkpoint(tmp_path / "q", [0, 1], [0])
    for location in (f"file://{tmp_path}/q", f"file:{tmp_path}/q"):
        assert (read_checkpoint(location).last_offset, read_checkpoint(location).last_commit) == (1, 0)
