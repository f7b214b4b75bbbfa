"""Print every tick of the default policy's simulation between two hours of a trace: executors,
lag, decision and the policy's message (the tick logs beside this file).

    python ticks.py TRACE.csv FROM_HOUR TO_HOUR [p99]

Simulates the first two days only (the hours must lie within them); with ``p99`` the trace is
scaled as at the second scale (16 executors at the 99th percentile), else as at the first.
"""

import sys

from autoscaler.tools.sim.runner import simulate
from autoscaler.tools.traces import load_trace

trace, h0, h1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
scale = {"peak_executors": 16, "scale_quantile": 0.99} if len(sys.argv) > 4 else {}
start = []


def on_tick(rec, cl):
    if not start:
        start.append(rec.at)
    h = (rec.at - start[0]).total_seconds() / 3600
    if h0 <= h <= h1:
        d = rec.decision
        print(f"{h:7.3f} ex {rec.executors_alive:3d} req {rec.executors_requested} lag {cl.lag_now():6.1f} "
              f"dec {d.current}->{d.target} {d.reason.value:22s} | {rec.proposal.message[:170]}")


simulate(load_trace(trace), days=2, on_tick=on_tick, **scale)
