import json

from autoscaler.spark.checkpoint import read_checkpoint, remove_offsets_after


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
