"""spark-autoscaler: an elastic scaling daemon for Spark Structured Streaming.

The layers, bottom up (``docs/architecture.md``; ``lint-imports`` keeps them):
``core`` (pure decisions) < ``policies`` (the top-level package) < ``runtime`` (the loop, the
reconciler, the realizer, state, audit) < ``spark`` | ``ops`` (adapters and the operator edge)
< ``app`` (the composition root, driver mode, attach) < ``tools`` (simulator, benchmarks, demo,
dashboard rendering) < ``cli``.
"""

from __future__ import annotations

from typing import Any

from autoscaler._version import __version__

__all__ = ["PipelineContext", "PipelineSpec", "__version__", "attach", "pipeline"]


def __getattr__(name: str) -> Any:  # lazy: importing the package must not import pyspark
    if name in ("pipeline", "PipelineContext", "PipelineSpec"):
        from autoscaler.spark import pipelines

        return getattr(pipelines, name)
    if name == "attach":
        # the function lives in `app.attached`: a module named `attach` would replace a package
        # attribute of that name with the module once imported ("'module' object is not callable")
        from autoscaler.app.attached import attach

        return attach
    raise AttributeError(name)
