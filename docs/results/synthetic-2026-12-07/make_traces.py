"""Eight synthetic loads of 14 days at 5-minute steps, the shapes real loads are made of (a probe of
generalization, not a target): ``python make_traces.py DIR`` writes them as NAB-format traces.

flat (with 1 % noise), a daily sine, a daily square wave (12 h at 100, 12 h at 20), the daily sine
with 15 % noise, a step to three times the level after a week, 60 short spikes (5-15 minutes,
200-1000) on a base of 20, a weekly cycle (weekends at 40 %), and a daily cycle growing threefold.
"""

import datetime as dt
import sys
from pathlib import Path

import numpy as np


def main(out: Path) -> None:
    rng = np.random.default_rng(7)
    t0 = dt.datetime(2021, 3, 1)
    n = 14 * 288
    i = np.arange(n)
    hours = (i * 5 / 60.0) % 24
    day = i // 288
    shapes = {
        "synth_flat": np.full(n, 100.0) + rng.normal(0, 1, n),
        "synth_daily_sine": 100 + 80 * np.sin(2 * np.pi * (hours - 9) / 24),
        "synth_square": np.where((hours >= 8) & (hours < 20), 100, 20) + rng.normal(0, 2, n),
        "synth_daily_noisy": (100 + 80 * np.sin(2 * np.pi * (hours - 9) / 24)) * (1 + rng.normal(0, 0.15, n)),
        "synth_jump": np.where(day >= 7, 300, 100) * (1 + rng.normal(0, 0.05, n)),
    }
    spikes = np.zeros(n)
    for s in rng.choice(n, size=60, replace=False):
        spikes[s : s + rng.integers(1, 4)] += rng.uniform(200, 1000)
    shapes["synth_spikes"] = 20 + rng.normal(0, 2, n) + spikes
    shapes["synth_weekly"] = (100 + 60 * np.sin(2 * np.pi * (hours - 9) / 24)) * np.where((day % 7) >= 5, 0.4, 1.0) * (1 + rng.normal(0, 0.05, n))
    shapes["synth_growth"] = (50 + 40 * np.sin(2 * np.pi * (hours - 9) / 24)) * (1 + 2 * i / n) * (1 + rng.normal(0, 0.05, n))
    out.mkdir(parents=True, exist_ok=True)
    for name, values in shapes.items():
        rows = [f"{(t0 + dt.timedelta(minutes=5 * k)).isoformat(sep=' ')},{max(0.0, v):.3f}" for k, v in enumerate(values)]
        (out / f"{name}.csv").write_text("timestamp,value\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
