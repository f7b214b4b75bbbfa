"""Pipelines used by the driver-mode tests (and a worked example of the pipeline API).

Environment: SAMPLE_START (epoch seconds the stream's timeline starts) and SAMPLE_OUT.
"""

from __future__ import annotations

import os
from pathlib import Path

from autoscaler import pipeline
from autoscaler.tools.demo.workload import trace_pipeline
from autoscaler.tools.traces import RateProfile

START = float(os.environ.get("SAMPLE_START", "0"))
OUT = Path(os.environ.get("SAMPLE_OUT", "sample-output"))

_stream = trace_pipeline(profile=RateProfile.steps([(3600, 300)]), start=START, cost_seconds=0.0005, out_dir=OUT / "stream")
# 1500 rows generated from 30 to 25 s before START, then nothing: a bounded input, complete before
# the daemon starts (the tests set START 20 s ahead). Its availableNow run takes what has arrived
# when it starts: with the rows still arriving at START - 10 .. START - 5, a daemon whose Spark came
# up within 15 s (a fast host) read 1399 of them.
_bounded = trace_pipeline(profile=RateProfile.steps([(5, 300)]), start=START - 30, cost_seconds=0.0, out_dir=OUT / "bounded")


@pipeline("stream", trigger="1s", max_parallelism=8)
def stream(spark, ctx):
    return _stream(spark, ctx)


@pipeline("bounded", available_now=True, initial_parallelism=2)
def bounded(spark, ctx):
    return _bounded(spark, ctx)
