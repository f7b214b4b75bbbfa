"""Run every registered policy on one trace and tabulate the KPIs."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from autoscaler.tools.parallel import as_finished
from autoscaler.tools.sim.runner import SimResult, simulate
from autoscaler.tools.traces import Trace
from policies import policy_names, resolve_name


def compared_policies() -> list[str]:
    """Every registered policy once: ``default`` first (it names the recommended one), then the rest."""
    names = [n for n in policy_names() if resolve_name(n) == n]
    default = resolve_name("default")
    return ["default"] + [n for n in names if n != default]


def _run(args: tuple[Trace, str, dict[str, Any]]) -> SimResult:
    trace, policy, options = args
    return simulate(trace, policy=policy, **options)


def compare_policies(
    trace: Trace,
    *,
    jobs: int = 1,
    policies: Sequence[str] | None = None,
    progress: Callable[[str, float], None] | None = None,
    **options: Any,
) -> list[SimResult]:
    """Every policy's result, in the order of ``policies``. ``progress(what, share)`` follows each
    policy's run as it goes when they run one at a time; in parallel, ``what`` is "every policy"
    and ``share`` the share of the policies done."""
    names = list(policies or compared_policies())
    if jobs <= 1:
        return [simulate(trace, policy=name, progress=_for(progress, name), **options) for name in names]
    by_name: dict[str, SimResult] = {}
    for done, ((_, name, _), result) in enumerate(as_finished(_run, [(trace, n, options) for n in names], jobs), start=1):
        by_name[name] = result
        if progress is not None:
            progress("every policy", done / len(names))
    return [by_name[name] for name in names]


def _for(progress: Callable[[str, float], None] | None, policy: str) -> Callable[[float], None] | None:
    return None if progress is None else lambda share: progress(policy, share)


COLUMNS = (
    ("policy", "policy", "{}"),
    ("cost_ratio", "cost x oracle", "{:.2f}"),
    ("slo_violation_fraction", "SLO violations", "{:.2%}"),
    ("p95_lag_seconds", "p95 lag s", "{:.1f}"),
    ("max_lag_seconds", "max lag s", "{:.0f}"),
    ("rescales_per_day", "rescales/day", "{:.1f}"),
    ("overshoot_fraction", "overshoot", "{:.1%}"),
    ("mean_executors", "mean executors", "{:.1f}"),
)


def format_table(results: Sequence[SimResult]) -> str:
    """A Markdown table (readable in a terminal too)."""
    if not results:
        return ""
    r = results[0]
    head = (
        f"trace {r.trace}: {r.simulated_seconds / 86400:.1f} days, oracle {r.oracle_mean_executors:.2f} executors on average, "
        f"SLO lag {r.slo_lag_seconds:g} s; with at most {r.budget_rescales_per_day:g} changes a day even perfect foresight "
        f"costs {r.budget_oracle_cost_ratio:.2f}x the oracle (overshoot {r.budget_oracle_overshoot_fraction:.1%}), and an "
        f"online ski rental that sees the need only as it comes, with executors at once, {r.ski_rental_cost_ratio:.2f}x; "
        f"the whole ceiling at once would lag beyond the SLO {r.ceiling_slo_violation_fraction:.2%} of the time"
    )
    rows = [[fmt.format(getattr(r, key)) for key, _, fmt in COLUMNS] for r in results]
    titles = [title for _, title, _ in COLUMNS]
    widths = [max(len(t), *(len(row[i]) for row in rows)) for i, t in enumerate(titles)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"
    out = [head, "", line(titles), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(row) for row in rows]
    return "\n".join(out)
