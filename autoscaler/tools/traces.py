"""Workload traces (NAB format ``timestamp,value``) and piecewise-constant rate profiles.

**Timestamps that do not increase** (a daylight-saving change in a trace exported in local time,
a double export, rows out of order) are read by one rule, *merge by order*: in file order, a row
whose timestamp is not after the previous step's joins that step, and a step's value is the mean
of the rows it holds. The rest of the trace keeps its timestamps (nothing shifts the hours after
it), and a trace exported twice reads as once. A warning on stderr says once per trace how many
rows were merged and where the first was. The two EC2 traces of ``../shared/traces`` were exported
in local time: at the spring-forward change the twelve rows of the missing hour all say
``03:00:00``; they become one step, the mean of the twelve.

**A gap far longer than the trace's step** (an outage of the collector that exported it: no
rows, not a load of zero nor the value before it held for days) is *skipped*: the rows after it
move back to follow the row before it by one step, so a day of missing data is not replayed as a
day of the last value. A far gap is one over both ``GAP_STEPS`` (100) times the trace's step (the
median of the gaps but the longest, so one far row in a trace of three is measured against the
others) and ``GAP_SECONDS`` (a day): 100 steps of a sub-second trace are seconds, a day of a
5-minute trace is 288 steps. Shorter gaps are read as they are (the value before holds). A
warning on stderr says once per trace how many gaps were skipped, the first's line and the
longest. A shared trace (``../shared/traces``) has a gap of 12.8 steps at most (EC2 network in,
01:56 to 03:00 at the spring-forward change; EC2 disk 12.2, ELB 2.0, the others 1.0), far under
either bound. **A date typed wrong** (a year off in an export) shows as a far gap that the rows
after it go back across: such a trace is refused, naming the line past the gap and the line of
the first row before it, since merge by order would fold the rest of the trace into that one
step. **A trace spanning more than 3650 days** once its far gaps are skipped (the longest duration
the daemon takes) is refused too, naming its first and last row.

**A trace sorted newest first** (more rows earlier than the row before them than later) is
read in reverse, oldest first, with a warning: merge by order alone would fold it into one step.
Merge by order then applies to what is still out of order. **A row of more than two columns** is
refused, naming the line: a value written with a thousands separator (``10,844``) would otherwise
read as its first digits.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
import sys
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any, Iterator, Sequence

from autoscaler.core.settings import MAX_DURATION
from autoscaler.runtime.config import file_problem


class TraceError(ValueError):
    """A trace file is unusable; the message names the file, line and problem."""


class TraceWarning(UserWarning):
    """A trace was read by one of the module docstring's rules rather than as it was written."""


class TraceOrderWarning(TraceWarning):
    """A trace's timestamps did not increase everywhere; they were read by order (module docstring)."""


class TraceGapWarning(TraceWarning):
    """A trace had gaps far longer than its step; they were skipped (module docstring)."""


GAP_STEPS = 100  # a gap between two rows is skipped over this many steps and GAP_SECONDS (module docstring)
GAP_SECONDS = 86400.0


def _sorted_gaps(stamps: Sequence[datetime]) -> list[float]:
    """The seconds between consecutive timestamps, shortest first."""
    return sorted((b - a).total_seconds() for a, b in pairwise(stamps))


def median_gap_seconds(stamps: Sequence[datetime]) -> float:
    """The median gap between consecutive timestamps (a trace's step); 60 s for a single row."""
    gaps = _sorted_gaps(stamps)
    return gaps[len(gaps) // 2] if gaps else 60.0


@dataclass(frozen=True)
class Trace:
    name: str
    timestamps: tuple[datetime, ...]
    values: tuple[float, ...]

    @cached_property  # sorts every gap: computed once per trace (the CLI and the workload both ask)
    def step_seconds(self) -> float:
        """The trace's regular step (median gap between points)."""
        return median_gap_seconds(self.timestamps)

    @cached_property
    def span_seconds(self) -> float:
        """Seconds the trace covers: first timestamp to last, plus one step (the last value holds a step)."""
        return (self.timestamps[-1] - self.timestamps[0]).total_seconds() + self.step_seconds


def load_trace(path: str | Path) -> Trace:
    path = Path(path)
    if problem := file_problem(path):
        raise TraceError(f"trace {str(path)!r} {problem}")
    try:
        # utf-8-sig: a byte-order mark (spreadsheet exports) is not part of the header
        with path.open(newline="", encoding="utf-8-sig") as fh:
            record_line = [1]  # the line the record being read starts on
            stamps, values = _read_rows(str(path), _records(csv.reader(fh), record_line))
    except csv.Error as exc:
        # a quote never closed swallows the lines after it into one field, until the csv module's
        # field limit (128 KiB) stops it: named by the line the record began on
        raise TraceError(f"trace {str(path)!r}: line {record_line[0]}: {exc} (a quote never closed?)") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"trace {str(path)!r} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise TraceError(f"trace {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if not values:
        raise TraceError(f"trace {str(path)!r} has no data rows")
    if max(values) <= 0:
        raise TraceError(f"trace {str(path)!r}: every value is zero")
    return Trace(path.stem, tuple(stamps), tuple(values))


def _records(reader: Any, start: list[int]) -> Iterator[list[str]]:
    """The rows of ``reader``, keeping in ``start[0]`` the line each one begins on."""
    while True:
        start[0] = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        yield row


def _read_rows(name: str, reader: Iterator[list[str]]) -> tuple[list[datetime], list[float]]:
    rows = _parsed_rows(name, reader)
    backwards = sum(b[1] < a[1] for a, b in pairwise(rows))  # earlier than the row before (a repeat is not)
    newest_first = backwards > 0 and backwards > len(rows) - 1 - backwards
    if newest_first:
        rows.reverse()  # an export sorted newest first: read oldest first (module docstring)
    stamps: list[datetime] = []
    lines: list[int] = []  # the file line of each step's first row, for the gap check's message
    merged: list[list[float]] = []  # the rows of each step
    earliest: list[tuple[datetime, int]] = []  # each step's earliest row (timestamp, line): a row merged back
    moved = 0
    first = 0
    for line, ts, value in rows:
        if stamps and ts <= stamps[-1]:
            merged[-1].append(value)  # merge by order (module docstring)
            earliest[-1] = min(earliest[-1], (ts, line))
            moved += 1
            first = first or line
            continue
        stamps.append(ts)
        lines.append(line)
        merged.append([value])
        earliest.append((ts, line))
    stamps = _skip_far_gaps(name, stamps, lines, earliest)
    _refuse_long_span(name, stamps, lines)
    if newest_first:
        warnings.warn(
            f"trace {name!r}: {backwards} of its {len(rows)} rows have a timestamp earlier than the row before them "
            "(sorted newest first); read in reverse, oldest first",
            TraceOrderWarning,
            stacklevel=3,
        )
    if moved:
        warnings.warn(
            f"trace {name!r}: {moved} row(s) with a timestamp not after the previous row's, the first on line {first}; "
            "merged by order into the step before them (its value the mean of its rows)",
            TraceOrderWarning,
            stacklevel=3,
        )
    return stamps, [sum(group) / len(group) for group in merged]


def _parsed_rows(name: str, reader: Iterator[list[str]]) -> list[tuple[int, datetime, float]]:
    """``(line, timestamp, value)`` of each data row in file order, each checked on its own."""
    header = next(reader, None)
    if header is None:
        raise TraceError(f"trace {name!r} is empty")
    if [h.strip().lower() for h in header] != ["timestamp", "value"]:
        raise TraceError(f"trace {name!r}: line 1 must be the header 'timestamp,value', got {','.join(header)!r}")
    rows: list[tuple[int, datetime, float]] = []
    for line, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 2:
            raise TraceError(
                f"trace {name!r}: line {line} has {len(row)} column(s), expected 2 (timestamp,value), got {row!r}"
                + ("; a thousands separator? write the value without it, or quote it" if len(row) > 2 else "")
            )
        try:
            ts = datetime.fromisoformat(row[0].strip())
        except ValueError:
            raise TraceError(f"trace {name!r}: line {line}: {row[0]!r} is not a timestamp") from None
        try:
            value = float(row[1])
        except ValueError:
            raise TraceError(f"trace {name!r}: line {line}: {row[1]!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise TraceError(f"trace {name!r}: line {line}: value {row[1]!r} must be a finite number >= 0")
        if rows and (ts.tzinfo is None) != (rows[0][1].tzinfo is None):
            raise TraceError(f"trace {name!r}: line {line}: timestamps mix a time zone and none ({row[0].strip()!r})")
        rows.append((line, ts, value))
    return rows


def _skip_far_gaps(name: str, stamps: list[datetime], lines: Sequence[int], earliest: Sequence[tuple[datetime, int]]) -> list[datetime]:
    """``stamps`` with each gap over GAP_STEPS steps and GAP_SECONDS closed to one step, the steps
    after it moved back (module docstring), and a warning naming them; a far gap that later rows
    go back across (a date typed wrong) is refused, naming both lines."""
    # the step is the median of the gaps but the longest: in a short trace one far row is half its
    # gaps and was the median itself (rows 30 minutes and a year apart read as a trace of yearly steps)
    gaps = _sorted_gaps(stamps)[:-1]
    if not gaps:
        return stamps  # one gap: nothing to measure it against (the span rule bounds it)
    step = gaps[len(gaps) // 2]
    limit = max(GAP_STEPS * step, GAP_SECONDS)
    far = [i for i, (a, b) in enumerate(pairwise(stamps)) if (b - a).total_seconds() > limit]
    if not far:
        return stamps
    # the earliest row merged into each step or any step after it
    after = list(itertools.accumulate(reversed(earliest), min))[::-1]
    for i in far:
        # a row merged into a step past the gap, from more than the limit before that step: the
        # trace went back across the gap, so the date past it is wrong (or the rows after it)
        back = after[i + 1]
        if (stamps[i + 1] - back[0]).total_seconds() > limit:
            raise TraceError(
                f"trace {name!r}: line {lines[i + 1]}: timestamp {stamps[i + 1]} is {(stamps[i + 1] - stamps[i]).total_seconds() / 86400:.4g} "
                f"days after {stamps[i]} on line {lines[i]}, and line {back[1]} goes back to {back[0]}: a date typed wrong? Fix it"
            )
    closed: list[datetime] = []
    shift = timedelta(0)
    skipped: list[float] = []
    gap_before = {i + 1 for i in far}
    for i, ts in enumerate(stamps):
        if i in gap_before:
            gap = ts - stamps[i - 1]
            shift += gap - timedelta(seconds=step)
            skipped.append(gap.total_seconds())
        closed.append(ts - shift)
    warnings.warn(
        f"trace {name!r}: {len(skipped)} gap(s) with no rows over {GAP_STEPS} steps of {step:g} s and over a day skipped "
        f"(an outage of the export?), the first between lines {lines[far[0]]} and {lines[far[0] + 1]}, the longest {max(skipped) / 86400:.4g} days; "
        "the rows after each follow the row before it by one step",
        TraceGapWarning,
        stacklevel=4,
    )
    return closed


def _refuse_long_span(name: str, stamps: Sequence[datetime], lines: Sequence[int]) -> None:
    """A trace longer than the longest duration the daemon takes (``MAX_DURATION``, 3650 days) is
    refused: the gap rule reads a trace's step from its own gaps, so a few rows far apart (a year
    typed 9999) pass it, and would be replayed tick by tick for centuries."""
    if len(stamps) >= 2 and stamps[-1] - stamps[0] > MAX_DURATION:
        raise TraceError(
            f"trace {name!r}: it spans {(stamps[-1] - stamps[0]).days} days, from {stamps[0]} on line {lines[0]} to "
            f"{stamps[-1]} on line {lines[-1]}, more than {MAX_DURATION.days}; a date typed wrong?"
        )


@dataclass(frozen=True)
class RateProfile:
    """Rows/s as a step function of elapsed seconds: ``rates[i]`` from ``starts[i]``.

    ``cumulative(t)`` counts rows generated in [0, t); ``time_of(row)`` inverts it (the
    generation time of a row id), which gives exact per-row lag.
    """

    starts: tuple[float, ...]
    rates: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.starts or len(self.starts) != len(self.rates) or self.starts[0] != 0:
            raise ValueError("a profile needs matching starts/rates beginning at 0")
        if any(b <= a for a, b in pairwise(self.starts)):
            raise ValueError("profile starts must increase")
        if any(r < 0 for r in self.rates):
            raise ValueError("profile rates must be >= 0")
        object.__setattr__(self, "_cum", self._prefix())

    def _prefix(self) -> tuple[float, ...]:
        cum = [0.0]
        for i in range(1, len(self.starts)):
            cum.append(cum[-1] + self.rates[i - 1] * (self.starts[i] - self.starts[i - 1]))
        return tuple(cum)

    def rate_at(self, t: float) -> float:
        if t < 0:
            return 0.0
        return self.rates[bisect.bisect_right(self.starts, t) - 1]

    def cumulative(self, t: float) -> int:
        if t <= 0:
            return 0
        i = bisect.bisect_right(self.starts, t) - 1
        cum: tuple[float, ...] = self._cum  # type: ignore[attr-defined]
        return int(cum[i] + self.rates[i] * (t - self.starts[i]))

    def time_of(self, row: int) -> float:
        """Elapsed second at which ``row`` (0-based) was generated."""
        cum: tuple[float, ...] = self._cum  # type: ignore[attr-defined]
        target = row + 1
        i = bisect.bisect_right(cum, target) - 1
        while i > 0 and self.rates[i] == 0:
            i -= 1
        rate = self.rates[i]
        if rate <= 0:
            return self.starts[i]
        return self.starts[i] + (target - cum[i]) / rate

    def encode(self) -> str:
        """Text that :meth:`decode` turns back into this very profile (the demo hands it to the
        Spark source): ``repr`` keeps every digit, where ``{:g}`` kept six, so a source fed
        123456.7 rows/s generated 123457 and the exactly-once check counted rows as duplicated."""
        return ",".join(f"{s!r}:{r!r}" for s, r in zip(self.starts, self.rates, strict=True))

    @classmethod
    def decode(cls, text: str) -> RateProfile:
        pairs = [p.split(":") for p in text.split(",") if p]
        return cls(tuple(float(a) for a, _ in pairs), tuple(float(b) for _, b in pairs))

    @classmethod
    def steps(cls, phases: Sequence[tuple[float, float]]) -> RateProfile:
        """From (duration seconds, rate) phases; the rate is 0 after the last phase."""
        starts, rates, t = [], [], 0.0
        for seconds, rate in phases:
            starts.append(t)
            rates.append(rate)
            t += seconds
        starts.append(t)
        rates.append(0.0)
        return cls(tuple(starts), tuple(rates))


def scale_to_peak(value: float, peak: float, peak_rate: float) -> float:
    """``value`` as a rate, the trace's ``peak`` becoming ``peak_rate``.

    ``peak_rate x value / peak`` (the order the recorded results were computed in), or
    ``peak_rate x (value / peak)`` where the product would overflow (values near the float maximum).
    """
    if peak > sys.float_info.max / peak_rate:
        return peak_rate * (value / peak)
    return peak_rate * value / peak


def prefixed(profile: RateProfile, seconds: float, rate: float) -> RateProfile:
    """``profile`` delayed by a constant phase of ``rate`` rows/s lasting ``seconds``."""
    if seconds <= 0:
        return profile
    return RateProfile((0.0, *(seconds + s for s in profile.starts)), (rate, *profile.rates))


# The most phases (compressed steps) a replay may have. The profile is handed to the Spark source
# as text (``RateProfile.encode``, about 34 bytes a phase) and travels with the source's reader to
# the Python workers that generate rows; 10,000 phases are about 340 KB and take 16 ms to build.
# The demo's default (180 s of 30-minute steps at 150 s a day) has 58; a 5-minute trace at 150 s a
# day reaches 10,000 after 86 minutes. A sub-second trace or a tiny seconds-per-day asked for
# billions, built one by one before anything was checked (the demo hung).
MAX_PHASES = 10_000


def compress_trace(
    trace: Trace, *, seconds_per_day: float, peak_rate: float, duration: float, start_hour: float = 0.0, start: datetime | None = None
) -> RateProfile:
    """Replay ``trace`` so that one day passes in ``seconds_per_day``, scaled so its peak is ``peak_rate``.

    Starts at the first point at or after ``start`` (else at or after ``start_hour`` o'clock on
    the first day) and covers ``duration`` compressed seconds; the rate is 0 afterwards. More
    than ``MAX_PHASES`` compressed steps are refused (TraceError) before any is built.
    """
    if seconds_per_day <= 0 or peak_rate <= 0 or duration <= 0:
        raise ValueError("seconds_per_day, peak_rate and duration must be > 0")
    step = trace.step_seconds * seconds_per_day / 86400.0
    _refuse_too_many_phases(trace, step=step, seconds_per_day=seconds_per_day, duration=duration)
    if start is not None:
        first = bisect.bisect_left(trace.timestamps, start)
        if first >= len(trace.timestamps):
            raise ValueError(f"trace {trace.name!r} ends before {start}")
    else:
        first = next((i for i, ts in enumerate(trace.timestamps) if ts.hour + ts.minute / 60 >= start_hour), 0)
    count = max(1, math.ceil(duration / step))
    window = [trace.values[(first + k) % len(trace.values)] for k in range(count)]
    peak = max(window) or 1.0  # scale the replayed window, not the whole trace, to peak_rate
    phases = []
    for k, value in enumerate(window):
        length = min(step, duration - k * step)
        if length > 0:
            phases.append((length, scale_to_peak(value, peak, peak_rate)))
    return RateProfile.steps(phases)


def _refuse_too_many_phases(trace: Trace, *, step: float, seconds_per_day: float, duration: float) -> None:
    """More than MAX_PHASES steps of ``step`` compressed seconds in ``duration``: refused, with the
    seconds per day that would fit (a step that underflows to 0 s is infinitely many)."""
    phases = duration / step if step > 0 else math.inf
    if phases <= MAX_PHASES:
        return
    fits = duration * 86400.0 / (trace.step_seconds * MAX_PHASES)
    raise TraceError(
        f"trace {trace.name!r}: its step of {trace.step_seconds:g} s lasts {step:.3g} s at {seconds_per_day:g} seconds per day, "
        f"so {duration:g} s of replay would be {phases:.3g} steps, over the {MAX_PHASES:,} a replay may have; "
        # a day of infinite seconds is no advice (--duration 1e308 was told "at least inf")
        + (f"give a day at least {fits:.3g} seconds, or replay a shorter duration" if math.isfinite(fits) else "replay a shorter duration")
    )
