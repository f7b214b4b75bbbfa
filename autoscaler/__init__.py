"""spark-autoscaler: an elastic scaling daemon for Spark Structured Streaming."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["PipelineContext", "PipelineSpec", "__version__", "attach", "pipeline"]


def __getattr__(name: str) -> Any:  # lazy: importing the package must not import pyspark
    if name in ("pipeline", "PipelineContext", "PipelineSpec"):
        from autoscaler import pipelines

        return getattr(pipelines, name)
    if name == "attach":
        # the function lives in `attached`: a submodule named `attach` would replace this
        # attribute with the module once imported ("'module' object is not callable")
        from autoscaler.attached import attach

        return attach
    raise AttributeError(name)
