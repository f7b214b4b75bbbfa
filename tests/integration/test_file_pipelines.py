"""A pipeline loaded from a file runs its Python code on the executors.

``load_pipelines("pipelines.py")`` imports the file under a synthetic module name
(``spark_autoscaler_pipelines_<stem>``) that no executor can import. A Python UDF defined in
such a file, or in a module beside it that the file (or later its builder) imports, is pickled by reference unless the
module is registered with cloudpickle to be pickled by value; then its tasks fail on the
executors with ``ModuleNotFoundError``. On
Kubernetes this is how a ``configMapRef`` pipeline arrives: a file mounted into the driver pod
only.
"""

from __future__ import annotations

import textwrap

import pytest

from autoscaler.spark.pipelines import PipelineContext, load_pipelines

pytestmark = pytest.mark.spark

# the UDFs live in the file and the helpers they call in modules beside it, nowhere else: one
# imported as the file runs, one as the builder runs
PIPELINE_FILE = textwrap.dedent(
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from autoscaler import pipeline
    from udf_sibling_helpers import shout

    @F.udf(returnType=LongType())
    def tagged(n):
        return shout(n)

    @pipeline("udf_rows", trigger="1s", initial_parallelism=2)
    def udf_rows(spark, ctx):
        from udf_lazy_helpers import double  # imported as the query is built, once the file has run

        doubled = F.udf(lambda n: double(n), LongType())
        src = spark.readStream.schema("n LONG").json(ctx.checkpoint_location + "-input")
        return src.select(tagged("n").alias("t"), doubled("n").alias("d")).writeStream.format("memory").queryName("udf_rows").outputMode("append")
    """
)


@pytest.fixture(scope="module")
def spark(spark_session_factory):
    # executors in their own JVMs and Python workers: nothing of the driver's modules is there
    return spark_session_factory("local-cluster[1,1,512]")


def test_a_python_udf_in_a_file_loaded_pipeline_runs_on_the_executors(spark, tmp_path):
    path = tmp_path / "my_pipelines.py"
    path.write_text(PIPELINE_FILE)
    (tmp_path / "udf_sibling_helpers.py").write_text("def shout(n):\n    return n * 10 + 7\n")
    (tmp_path / "udf_lazy_helpers.py").write_text("def double(n):\n    return n * 2\n")
    [spec] = load_pipelines(str(path))
    checkpoint = str(tmp_path / "ckpt")
    (tmp_path / "ckpt-input").mkdir()
    (tmp_path / "ckpt-input" / "rows.json").write_text("".join(f'{{"n": {n}}}\n' for n in range(5)))
    writer = spec.build(spark, PipelineContext(spec.name, 2, checkpoint))
    query = writer.option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start()
    try:
        query.processAllAvailable()
        assert query.exception() is None
        rows = sorted((r.t, r.d) for r in spark.sql("SELECT t, d FROM udf_rows").collect())
    finally:
        query.stop()
    assert rows == [(7, 0), (17, 2), (27, 4), (37, 6), (47, 8)]
