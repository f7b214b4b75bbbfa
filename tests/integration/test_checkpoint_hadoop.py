"""A checkpoint read through the Spark driver's JVM and Hadoop file system, as the daemon reads
one on remote storage (s3a://, gs://, hdfs://, abfss://): checked here against Hadoop's own local
file system (a file:// URI), where the local reader reads the same files."""

from __future__ import annotations

import shutil

import pytest

from autoscaler.spark.checkpoint import (
    CheckpointUnreadable,
    HadoopFiles,
    LocalFiles,
    drop_offsets_after,
    hadoop_files,
    parse_checkpoint,
    read_checkpoint,
    remove_offsets_after,
)

pytestmark = pytest.mark.spark

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@pytest.fixture(scope="module")
def spark(spark_session_factory):
    return spark_session_factory("local[1]")


def test_the_hadoop_reader_reads_and_cleans_a_checkpoint_as_the_local_reader_does(spark, tmp_path):
    # remote checkpoints were never read: their pinned shuffle partitions, RocksDB state store and
    # last committed batch were unknown, and a failed repartition's dangling offsets/N stayed
    ckpt = tmp_path / "ckpt"
    uri = f"file://{ckpt}"
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    try:
        rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
        counts = rows.groupBy((rows.value % 5).alias("k")).count()
        for _ in range(2):  # one batch per availableNow run: batches 0 and 1
            query = counts.writeStream.format("noop").outputMode("update").option("checkpointLocation", uri).trigger(availableNow=True).start()
            assert query.awaitTermination(60) and query.exception() is None
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")

    local = read_checkpoint(ckpt)
    assert (local.last_offset, local.last_commit, local.shuffle_partitions, local.state_store) == (1, 1, 3, "rocksdb")
    hadoop = HadoopFiles(spark, uri)
    for folder in ("offsets", "commits", "state"):  # Hadoop's local file system hides the .crc files
        assert sorted(hadoop.names(folder)) == sorted(n for n in LocalFiles(ckpt).names(folder) if not n.endswith(".crc"))
    assert parse_checkpoint(hadoop) == local
    assert parse_checkpoint(HadoopFiles(spark, f"file://{tmp_path}/none")) == read_checkpoint(tmp_path / "none")  # not there: missing

    # a failed repartition planned batch 2 and never committed it
    shutil.copy(ckpt / "offsets" / "1", ckpt / "offsets" / "2")
    assert parse_checkpoint(HadoopFiles(spark, uri)) == read_checkpoint(ckpt) and not read_checkpoint(ckpt).clean
    assert drop_offsets_after(HadoopFiles(spark, uri), 1) == [2]
    assert sorted(p.name for p in (ckpt / "offsets").iterdir() if not p.name.startswith(".")) == ["0", "1"]
    assert not (ckpt / "offsets" / ".2.crc").exists()
    assert read_checkpoint(ckpt).clean and remove_offsets_after(ckpt, 1) == []


def test_storage_hadoop_cannot_reach_is_unreadable_with_the_jvms_reason(spark):
    # this machine's Spark has no S3A file system on its class path: the JVM's own error, never "missing"
    with pytest.raises(CheckpointUnreadable, match=r"^checkpoint s3a://bucket/ck/q could not be read: .*S3AFileSystem not found"):
        read_checkpoint("s3a://bucket/ck/q", hadoop=hadoop_files(spark))
