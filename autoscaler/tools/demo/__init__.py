"""The demo: a real local Spark cluster, a trace-driven stream, and the daemon scaling it."""
