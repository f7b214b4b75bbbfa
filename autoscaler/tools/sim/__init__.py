"""A deterministic, discrete-event simulator of a Spark streaming application.

The real reconciler drives it through the same ports it uses against Spark
(:class:`~autoscaler.tools.sim.cluster.SimCluster`); :func:`~autoscaler.tools.sim.runner.simulate` replays
a workload trace and scores a policy against an oracle.
"""

from autoscaler.tools.sim.cluster import SimCluster
from autoscaler.tools.sim.config import SimConfig
from autoscaler.tools.sim.runner import SimResult, simulate
from autoscaler.tools.sim.workload import Workload, workload_from_trace

__all__ = ["SimCluster", "SimConfig", "SimResult", "Workload", "simulate", "workload_from_trace"]
