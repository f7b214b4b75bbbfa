import sys
from autoscaler.tools.traces import load_trace
from autoscaler.tools.sim.runner import simulate
trace, h0, h1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
start = []
def on_tick(rec, cl):
    if not start: start.append(rec.at)
    h = (rec.at - start[0]).total_seconds() / 3600
    if h0 <= h <= h1:
        ld = rec.loads[0] if rec.loads else None
        d = rec.decision
        print(f"{h:7.3f} ex {rec.executors_alive:3d} req {rec.executors_requested} lag {cl.lag_now():6.1f} dec {d.current}->{d.target} {d.reason.value:22s} | {rec.proposal.message[:170]}")
simulate(load_trace(trace), days=2, on_tick=on_tick, **({"peak_executors": 16, "scale_quantile": 0.99} if len(sys.argv) > 4 else {}))
