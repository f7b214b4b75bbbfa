"""The synthetic loads of docs/benchmarks.md ("Synthetic loads beside the shared traces"): nine
week-long NAB-format traces of 5-minute steps, written to the folder given (default: traces/).

    python make_traces.py DIR
    spark-autoscaler benchmark traces --traces DIR --results RESULTS --policies default,target-utilization --jobs 2
"""

import math
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

random.seed(7)
START = datetime(2026, 1, 5)
STEP = timedelta(minutes=5)
N = 7 * 288  # a week of 5-minute steps
out = Path(sys.argv[1] if len(sys.argv) > 1 else "traces")
out.mkdir(parents=True, exist_ok=True)


def write(name: str, values: list[float]) -> None:
    with open(out / f"{name}.csv", "w") as f:
        f.write("timestamp,value\n")
        for i, v in enumerate(values):
            f.write(f"{START + i * STEP:%Y-%m-%d %H:%M:%S},{max(0.0, v):.3f}\n")


write("ramp", [100 + 900 * (i / N) for i in range(N)])
write("sawtooth_day", [100 + 900 * ((i % 288) / 288) for i in range(N)])
write("square_1h", [1000 if (i // 12) % 2 else 100 for i in range(N)])
write("square_6h", [1000 if (i // 72) % 2 else 100 for i in range(N)])
write("onoff_30m", [1000 if (i // 6) % 4 == 0 else 0 for i in range(N)])
write("rare_spike", [100 + (3000 if i % 576 == 300 else 0) for i in range(N)])
write("noise", [500 * math.exp(random.gauss(0, 0.5)) for i in range(N)])
write("sine_day_noise", [600 + 400 * math.sin(2 * math.pi * i / 288) + random.gauss(0, 60) for i in range(N)])
write("growth", [100 * math.exp(3 * i / N) for i in range(N)])
