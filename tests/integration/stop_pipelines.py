"""Pipelines of the driver-mode stop test: a grouped count and a pipeline whose sink fails for real.

Environment: STOP_OUT, the folder the sinks write their batch records to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autoscaler import pipeline

OUT = Path(os.environ.get("STOP_OUT", "stop-output"))


def _record(name: str):
    def sink(df, batch_id):
        rows = df.collect()  # a Py4J call a stop may interrupt
        folder = OUT / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"batch-{batch_id}.json").write_text(json.dumps({"batch": batch_id, "groups": len(rows)}))

    return sink


@pipeline("counts", trigger="1s", max_parallelism=4)
def counts(spark, ctx):
    # the `rate` source, a grouped count, foreachBatch: what a user's first pipeline looks like
    rows = spark.readStream.format("rate").option("rowsPerSecond", 50).option("numPartitions", ctx.parallelism).load()
    return rows.groupBy((rows.value % 10).alias("key")).count().writeStream.outputMode("update").foreachBatch(_record("counts"))


def _reject(df, batch_id):
    if batch_id >= 1:
        raise RuntimeError(f"the warehouse rejected batch {batch_id}")


@pipeline("failing", trigger="1s")
def failing(spark, ctx):
    return spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream.foreachBatch(_reject)
