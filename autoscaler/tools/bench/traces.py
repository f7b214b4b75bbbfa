"""``spark-autoscaler benchmark traces``: every policy on every trace, whole, at two scales, and
the default policy judged against the targets of ``docs/benchmarks.md``.

A policy is judged on every shared trace, not on the few it was tuned on, and at two scales: the
peak needs 32 executors, and the 99th percentile needs 16 (the spikes above the ceiling then
count against every policy). One run is one ``simulate --json`` result, written to
``RESULTS/{scale}/{policy}-{trace}.json`` as it finishes; a run whose file exists is not run
again, so a long comparison can be stopped and resumed, and the report reads whatever results
are there (a run not there yet is "not run").

The report checks, for the default policy on each trace and scale, the targets: cost at most
``1.2`` x the rescale-budget bound (``budget_oracle_cost_ratio``), SLO violations at most 0.5 %,
fewer than 24 rescales a day, ``overshoot_fraction`` at most 5 %, and no baseline both cheaper
and with fewer SLO violations.

With ``--compare-to BEFORE`` it also prints each policy's results beside the ones in ``BEFORE`` (a
change judged whole: before -> after on every trace and scale, and on how many runs each figure
went down, stayed, went up, at the precision shown).

With ``--days D`` each run simulates the first ``D`` days of its trace only (each trace scaled on
those days, as ``simulate --days``): a screening of a change in minutes where the whole traces
take an hour, never to be read as the whole judgement. Each result keeps its days, and results
of other days (or whole runs) are refused by name, on resume, in the report and in a comparison.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from autoscaler.runtime.files import write_whole
from autoscaler.tools.parallel import as_finished
from autoscaler.tools.provenance import code_label, code_version
from autoscaler.tools.sim.runner import simulate
from autoscaler.tools.traces import load_trace


@dataclass(frozen=True)
class Scale:
    """How a trace is scaled: its ``quantile`` needs ``peak_executors`` (the ceiling is twice that)."""

    name: str
    peak_executors: int
    quantile: float
    title: str


SCALES = {
    "peak": Scale("peak", 32, 1.0, "the peak needs 32 executors"),
    "p99": Scale("p99", 16, 0.99, "the 99th percentile needs 16 executors (--peak-executors 16 --scale-quantile 0.99)"),
}

# the targets (docs/benchmarks.md, "Every shared trace, whole, at two scales")
MAX_X_BOUND = 1.2
MAX_SLO_VIOLATION = 0.005
MAX_RESCALES_PER_DAY = 24.0
MAX_OVERSHOOT = 0.05


# the figures of a simulate --json result the report reads
KPIS = (
    "cost_ratio", "budget_oracle_cost_ratio", "slo_violation_fraction", "rescales_per_day", "overshoot_fraction",
    "query_restarts", "simulated_seconds", "wall_seconds",
)


@dataclass(frozen=True)
class Run:
    trace: Path
    scale: Scale
    policy: str
    # the policy's parameters other than its defaults (``--param``), kept in the result; not
    # hashed (a value may be a list), only compared: runs differing only in them are unequal
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # daemon settings (``--setting``, dotted keys such as normalize.scale_down_delay), applied
    # after the simulator's own; kept in the result and compared the same way
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # the first days of the trace simulated (``--days``); None: the whole trace
    days: float | None = None

    def result_file(self, results: Path) -> Path:
        return results / self.scale.name / f"{self.policy}-{self.trace.stem}.json"


def plan_runs(
    traces: Sequence[Path],
    scales: Sequence[str],
    policies: Sequence[str],
    params: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    days: float | None = None,
) -> list[Run]:
    """Every (trace, scale, policy), the shortest traces first (the first answers come soonest);
    ``params``, the policies' parameters (each policy run must take them); ``settings``, daemon
    settings for every run; ``days``, the first days of each trace simulated (None: all)."""
    by_size = sorted(traces, key=lambda p: (p.stat().st_size, p.name))
    given, changed = dict(params or {}), dict(settings or {})
    return [Run(t, SCALES[s], p, given, changed, days) for t in by_size for s in scales for p in policies]


def _simulate(run: Run) -> dict[str, Any]:
    result = simulate(
        load_trace(run.trace),
        policy=run.policy,
        params=run.params,
        settings=run.settings,
        peak_executors=run.scale.peak_executors,
        scale_quantile=run.scale.quantile,
        days=run.days,
    )
    # settings and days only when given: results from before the options read as run without them
    return {
        **result.to_json(),
        "policy_params": dict(run.params),
        **({"settings": dict(run.settings)} if run.settings else {}),
        **({"first_days": run.days} if run.days is not None else {}),
    }


def _check_params(run: Run, path: Path) -> None:
    """A result already there was run with this run's parameters and settings (none, for
    results without the key)."""
    try:
        kept = json.loads(path.read_text())
        found = {"policy parameters": kept.get("policy_params", {}), "settings": kept.get("settings", {})}
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return  # not a result: the report names it
    for what, wanted in (("policy parameters", run.params), ("settings", run.settings)):
        if found[what] != wanted:
            raise ValueError(
                f"{path}: run with {what} {found[what] or 'none'}, not {wanted or 'none'}; "
                "give another --results directory, or remove it to run it again"
            )
    _check_days(run, path, kept)


def _check_days(run: Run, path: Path, kept: Mapping[str, Any]) -> None:
    """A result simulated the days ``run`` asks for: a screening's first days are never read as a
    whole trace, nor the other way round."""
    found = kept.get("first_days")
    if found != run.days:
        raise ValueError(
            f"{path}: a run of {_span(found)}, not {_span(run.days)}; "
            "give another --results directory (or the same --days), or remove it to run it again"
        )


def _span(days: float | None) -> str:
    return "the whole trace" if days is None else f"the first {_days(days)}"


def _days(days: float) -> str:
    return f"{days:g} day" if days == 1 else f"{days:g} days"


def _check_writable(runs: Iterable[Run], results: Path) -> None:
    """Every run's result can be written where it goes: told before any run (a directory where
    a result goes, or a file where its scale's directory goes, failed with a traceback after
    the run, its result lost)."""
    for run in runs:
        path = run.result_file(results)
        if path.parent.exists() and not path.parent.is_dir():
            raise ValueError(f"{path.parent}: not a directory, where the results of a scale go; remove it or give another --results")
        if path.exists() and not path.is_file():
            raise ValueError(f"{path}: not a file, where a result goes; remove it or give another --results")


def _write(path: Path, result: Mapping[str, Any]) -> None:
    # whole or not at all: a run stopped mid-write leaves no file, and is run again
    write_whole(path, json.dumps(result, indent=2) + "\n")


def run_all(runs: Sequence[Run], results: Path, *, jobs: int = 1, log: Callable[[str], None] = lambda _: None) -> int:
    """Run every run whose result file is missing, ``jobs`` at a time; the number run. Each
    result keeps the code it was run with (:func:`~autoscaler.tools.provenance.code_version`,
    read once: the runs of one call share it)."""
    _check_writable(runs, results)
    todo = [r for r in runs if not r.result_file(results).is_file()]
    for run in runs:
        if run not in todo:
            _check_params(run, run.result_file(results))
    log(f"{len(runs) - len(todo)} of {len(runs)} runs already in {results}; {len(todo)} to run")
    code = code_version() if todo else None
    for done, (run, result) in enumerate(_finished(todo, jobs), start=1):
        _write(run.result_file(results), {**result, "code": code})
        log(f"[{done}/{len(todo)}] {run.scale.name} {run.policy} {run.trace.stem}")
    return len(todo)


def _finished(todo: Sequence[Run], jobs: int) -> Iterator[tuple[Run, dict[str, Any]]]:
    """Each run with its result as it finishes: in this process, or in ``jobs`` processes."""
    if jobs <= 1:
        yield from ((run, _simulate(run)) for run in todo)
        return
    yield from as_finished(_simulate, todo, jobs)


def read_results(runs: Iterable[Run], results: Path) -> dict[Run, dict[str, Any]]:
    """The results there are, by run."""
    found = {}
    for run in runs:
        path = run.result_file(results)
        if path.is_file():
            try:
                result = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # the latter named no file
                raise ValueError(f"{path}: not a simulate --json result ({exc}); remove it to run it again") from exc
            missing = [k for k in KPIS if not isinstance(result, dict) or not isinstance(result.get(k), (int, float))]
            if missing:
                raise ValueError(f"{path}: not a simulate --json result (no number for {', '.join(missing)}); remove it to run it again")
            _check_days(run, path, result)
            found[run] = result
    return found


def judge(default: Mapping[str, Any], baselines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The default policy's result against the targets: each figure, each target met or not, the
    baselines both cheaper and with fewer SLO violations, and the overshoot of the bound's own
    schedule and the idealised online ski rental's cost against the bound (the same for every
    policy of a trace and scale: a bound above 5 % overshoot says no policy within the rescale
    target can keep to 5 %, a ski rental above 1.2x the bound that even a release at one price
    chosen in hindsight, with instant executors, misses 1.2x, the ceiling's SLO violations
    above 0.5 % that no policy within the ceiling keeps to 0.5 %; None from results made before
    they were reported)."""
    bound = default["budget_oracle_cost_ratio"]
    x_bound = _over_bound(default["cost_ratio"], bound)
    ski_rental = _trace_figure("ski_rental_cost_ratio", default, baselines)
    dominated_by = sorted(
        name
        for name, b in baselines.items()
        if b["cost_ratio"] < default["cost_ratio"] and b["slo_violation_fraction"] < default["slo_violation_fraction"]
    )
    met = {
        "x_bound": x_bound <= MAX_X_BOUND,
        "slo": default["slo_violation_fraction"] <= MAX_SLO_VIOLATION,
        "rescales": default["rescales_per_day"] < MAX_RESCALES_PER_DAY,
        "overshoot": default["overshoot_fraction"] <= MAX_OVERSHOOT,
        "no_dominating_baseline": not dominated_by,
    }
    return {
        "bound": bound,
        "cost_ratio": default["cost_ratio"],
        "x_bound": x_bound,
        "slo_violation_fraction": default["slo_violation_fraction"],
        "rescales_per_day": default["rescales_per_day"],
        "overshoot_fraction": default["overshoot_fraction"],
        "query_restarts_per_day": query_restarts_per_day(default),
        "bound_overshoot_fraction": _trace_figure("budget_oracle_overshoot_fraction", default, baselines),
        "ceiling_slo_violation_fraction": _trace_figure("ceiling_slo_violation_fraction", default, baselines),
        "ski_rental_x_bound": None if ski_rental is None else _over_bound(ski_rental, bound),
        "baselines_run": sorted(baselines),
        "dominated_by": dominated_by,
        "met": met,
    }


def query_restarts_per_day(result: Mapping[str, Any]) -> float:
    """How often a day the policy restarted the query from its checkpoint (new partitions, a new
    rate limit): not a target, but each restart is a pause of the stream on real Spark (a
    batch boundary, a stop, a start from the checkpoint; ``benchmark latencies``)."""
    days = result["simulated_seconds"] / 86400
    return result["query_restarts"] / days if days > 0 else 0.0


def _trace_figure(key: str, default: Mapping[str, Any], baselines: Mapping[str, Mapping[str, Any]]) -> float | None:
    """A figure of the trace and scale, the same in every policy's result (None from results made before it was reported)."""
    return next((r[key] for r in (default, *baselines.values()) if isinstance(r.get(key), (int, float))), None)


def _over_bound(cost_ratio: float, bound: float) -> float:
    return cost_ratio / bound if bound > 0 else float("inf")


def report(runs: Sequence[Run], results: Path) -> dict[str, Any]:
    """Per scale and trace: the default policy judged (None when it has not run), and every
    result; per policy, how many of its results each code made (a set of results from several
    commits says so)."""
    found = read_results(runs, results)
    days = next((r.days for r in runs), None)
    out: dict[str, Any] = {"days": days, "scales": {}, "code": _codes(found)}
    for scale in dict.fromkeys(r.scale for r in runs):
        traces: dict[str, Any] = {}
        for trace in dict.fromkeys(r.trace for r in runs if r.scale == scale):
            mine = {r.policy: found[r] for r in runs if r.scale == scale and r.trace == trace and r in found}
            baselines = {name: r for name, r in mine.items() if name != "default"}
            traces[trace.stem] = {
                "judged": judge(mine["default"], baselines) if "default" in mine else None,
                "results": {name: _kpis(r) for name, r in mine.items()},
            }
        out["scales"][scale.name] = {"title": scale.title, "traces": traces}
    return out


def _codes(found: Mapping[Run, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per policy, the number of its results by the code that made them (``code_label``)."""
    counts: dict[str, Counter[str]] = {}
    for run, result in found.items():
        counts.setdefault(run.policy, Counter())[code_label(result.get("code"))] += 1
    return {policy: dict(by_code) for policy, by_code in counts.items()}


def _kpis(result: Mapping[str, Any]) -> dict[str, Any]:
    return {k: result[k] for k in KPIS}


def format_report(rep: Mapping[str, Any]) -> str:
    """Markdown tables, one per scale: the default policy's figures with a mark on each target
    missed (``!``) and the baselines that beat it on both cost and SLO violations."""
    out = []
    if rep.get("days") is not None:
        out += [f"**The first {_days(rep['days'])} of each trace only**: a screening, not the whole traces the targets are judged on.", ""]
    for scale in rep["scales"].values():
        out += [f"**{scale['title']}** (`!`: target missed)", ""]
        out.append(
            "| trace | bound | cost | x bound | SLO % | ceiling's SLO % | rescales/day | query restarts/day | overshoot % "
            "| bound's overshoot % | online ski rental x bound | baselines run | both cheaper and fewer SLO violations |"
        )
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for trace, entry in scale["traces"].items():
            j = entry["judged"]
            if j is None:
                out.append(f"| {trace} | not run | | | | | | | | | | {len(entry['results'])} | |")
                continue
            miss = {k: "" if ok else " !" for k, ok in j["met"].items()}
            bound_over = "-" if j["bound_overshoot_fraction"] is None else f"{100 * j['bound_overshoot_fraction']:.1f}"
            ski_rental = "-" if j["ski_rental_x_bound"] is None else f"{j['ski_rental_x_bound']:.2f}"
            ceiling_slo = "-" if j["ceiling_slo_violation_fraction"] is None else f"{100 * j['ceiling_slo_violation_fraction']:.2f}"
            out.append(
                f"| {trace} | {j['bound']:.2f} | {j['cost_ratio']:.2f} | {j['x_bound']:.2f}{miss['x_bound']} "
                f"| {100 * j['slo_violation_fraction']:.2f}{miss['slo']} | {ceiling_slo} | {j['rescales_per_day']:.1f}{miss['rescales']} "
                f"| {j['query_restarts_per_day']:.1f} | {100 * j['overshoot_fraction']:.1f}{miss['overshoot']} | {bound_over} | {ski_rental} | {len(j['baselines_run'])} "
                f"| {', '.join(j['dominated_by']) or 'none'} |"
            )
        out.append("")
    if rep.get("code"):
        out.append("Code of the results: " + "; ".join(_code_counts(policy, counts) for policy, counts in rep["code"].items()))
    return "\n".join(out).rstrip() + "\n"


def _code_counts(policy: str, counts: Mapping[str, int]) -> str:
    """``default 5292acd (20), not recorded (2)``: the code that made most results first."""
    ordered = sorted(counts.items(), key=lambda c: (-c[1], c[0]))
    return f"{policy} " + ", ".join(f"{label} ({n})" for label, n in ordered)


@dataclass(frozen=True)
class Figure:
    """A figure compared before and after a change; lower is better for each."""

    label: str
    value: Callable[[Mapping[str, Any]], float]
    digits: int  # decimals shown, and the precision at which two runs count as even


COMPARED = (
    Figure("x bound", lambda r: _over_bound(r["cost_ratio"], r["budget_oracle_cost_ratio"]), 2),
    Figure("SLO %", lambda r: 100 * r["slo_violation_fraction"], 2),
    Figure("rescales/day", lambda r: r["rescales_per_day"], 1),
    Figure("overshoot %", lambda r: 100 * r["overshoot_fraction"], 1),
    Figure("query restarts/day", query_restarts_per_day, 1),
)


def compare(runs: Sequence[Run], before: Path, after: Path) -> dict[str, Any]:
    """Each policy's runs in ``after`` beside the same runs in ``before``: per run the figures of
    ``COMPARED`` before and after, per policy how many runs each went lower, even or higher, and
    the runs found in only one of the two."""
    old, new = read_results(runs, before), read_results(runs, after)
    out: dict[str, Any] = {"before": str(before), "policies": {}}
    for policy in dict.fromkeys(r.policy for r in runs):
        mine = [r for r in runs if r.policy == policy]
        both = [r for r in mine if r in old and r in new]
        rows: list[dict[str, Any]] = [
            {"trace": r.trace.stem, "scale": r.scale.name,
             **{f.label: [round(f.value(old[r]), f.digits), round(f.value(new[r]), f.digits)] for f in COMPARED}}
            for r in both
        ]
        out["policies"][policy] = {
            "runs": rows,
            "tally": {f.label: _tally(row[f.label] for row in rows) for f in COMPARED},
            "only_before": [f"{r.scale.name}/{r.trace.stem}" for r in mine if r in old and r not in new],
            "only_after": [f"{r.scale.name}/{r.trace.stem}" for r in mine if r in new and r not in old],
        }
    return out


def _tally(pairs: Iterable[Sequence[float]]) -> dict[str, int]:
    counts = {"lower": 0, "even": 0, "higher": 0}
    for was, now in pairs:
        counts["lower" if now < was else "higher" if now > was else "even"] += 1
    return counts


def format_comparison(comp: Mapping[str, Any]) -> str:
    """Per policy: a table of before -> after on each run, and the tally under it."""
    out = []
    for policy, entry in comp["policies"].items():
        out += [f"**{policy}: {comp['before']} -> now**", ""]
        if not entry["runs"]:
            out += ["no run in both", ""]
            continue
        out.append("| trace | scale | " + " | ".join(f.label for f in COMPARED) + " |")
        out.append("| --- | --- |" + " --- |" * len(COMPARED))
        for row in entry["runs"]:
            cells = (f"{row[f.label][0]:.{f.digits}f} -> {row[f.label][1]:.{f.digits}f}" for f in COMPARED)
            out.append(f"| {row['trace']} | {row['scale']} | " + " | ".join(cells) + " |")
        out.append("")
        out += [f"- {label}: lower on {t['lower']}, even on {t['even']}, higher on {t['higher']}" for label, t in entry["tally"].items()]
        for side in ("only_before", "only_after"):
            if entry[side]:
                out.append(f"- {side.replace('_', ' ')}: {', '.join(entry[side])}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
