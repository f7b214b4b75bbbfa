"""A pipeline that raises while being built: the daemon must refuse to start anything."""

from autoscaler import pipeline


@pipeline("fine")
def fine(spark, ctx):
    return spark.readStream.format("rate").load().writeStream.format("noop")


@pipeline("broken")
def broken(spark, ctx):
    raise RuntimeError("cannot reach the Kafka cluster")
