"""Record every executor change of one whole simulation of the default policy at the second scale
(16 executors at the quantile): hours since the start, from, to, reason, message, rate and lag.
Usage: python record_changes.py ../shared/traces/T.csv 0.99 OUT.json (then gzip OUT.json).
The same run as `simulate --trace T.csv --peak-executors 16 --scale-quantile 0.99` (seed 0)."""
import json
import sys

from autoscaler.tools.sim.runner import simulate
from autoscaler.tools.traces import load_trace

trace, quantile, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = []
start = None
def on_tick(r, cluster):
    global start
    if start is None:
        start = r.at
    d = r.decision
    if d.changes:
        load = r.loads[0] if r.loads else None
        rows.append({
            "h": (r.at - start).total_seconds() / 3600, "from": d.current, "to": d.target,
            "reason": d.reason.value, "msg": d.message[:200],
            "prop_reason": r.proposal.reason.value,
            "rate": getattr(load, "input_rate", None),
            "lag": load.lag.total_seconds() if load is not None and load.lag is not None else None,
        })
res = simulate(load_trace(trace), policy="default", peak_executors=16, scale_quantile=quantile, on_tick=on_tick)
json.dump({"rescales": res.rescales if hasattr(res, "rescales") else None, "changes": rows}, open(out, "w"))
print(out, len(rows))
