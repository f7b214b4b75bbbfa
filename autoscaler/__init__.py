"""spark-autoscaler: an elastic scaling daemon for Spark Structured Streaming."""

from __future__ import annotations

__version__ = "0.1.0"
