"""Just enough PromQL to draw the dashboard's own queries from a metrics recording.

The offline dashboard (:mod:`autoscaler.tools.dashboard.render`) evaluates each panel's ``expr`` over a
:class:`~autoscaler.tools.dashboard.recording.Recording` (one scrape per tick), so the PNG in the docs shows
what Grafana would show, from the same queries. Supported:

* selectors with ``=``, ``!=``, ``=~``, ``!~`` matchers and range selectors ``[5m]``;
* ``rate``, ``increase``, ``changes``, ``avg_over_time``, ``histogram_quantile``, ``time``,
  ``clamp_min``, ``clamp_max``;
* ``sum``, ``max``, ``min``, ``avg``, ``count`` with ``by``/``without``;
* ``+ - * /`` and the comparisons ``== != > < >= <=`` (filtering) between vectors with the
  same labels or a vector and a scalar.

Not supported (a :class:`PromQLError` names it): ``on``/``ignoring``/``group_*`` matching,
``offset``, ``@``, subqueries, ``bool``, set operators. Counters are treated as Prometheus
does for resets but without extrapolation to the window edges, so ``increase`` can read a
little lower than Prometheus would. Every expression is also checked by ``promtool``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable, Union

from autoscaler.tools.dashboard.recording import Recording

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]
Scalar = float
Value = Union[Vector, Scalar]

AGGREGATIONS = {"sum", "max", "min", "avg", "count"}
RANGE_FUNCTIONS = {"rate", "increase", "changes", "avg_over_time"}
NAME = "__name__"


class PromQLError(ValueError):
    pass


# --- lexer -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<duration>\[\s*\d+(?:\.\d+)?(?:ms|s|m|h|d|w)\s*\])
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<op>==|!=|>=|<=|=~|!~|[-+*/(){},<>=])
    | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
    )""",
    re.VERBOSE,
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise PromQLError(f"bad duration {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise PromQLError(f"cannot parse {text[pos:pos + 20]!r} in {text!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


# --- syntax tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Selector:
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value), including __name__
    range: float | None = None  # seconds, for a range selector


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[object, ...]


@dataclass(frozen=True)
class Aggregate:
    op: str
    expr: object
    by: tuple[str, ...] | None = None
    without: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise PromQLError(f"expected {value or 'more'} in {self.text!r}, got {tok[1] if tok else 'the end'}")
        self.i += 1
        return tok

    def parse(self) -> object:
        node = self.comparison()
        if self.peek() is not None:
            raise PromQLError(f"unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]
        return node

    def _binary(self, ops: tuple[str, ...], operand: Callable[[], object]) -> object:
        node = operand()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in ops:
            self.take()
            nxt = self.peek()
            if nxt is not None and nxt[0] == "ident" and nxt[1] in ("on", "ignoring", "group_left", "group_right", "bool"):
                raise PromQLError(f"{nxt[1]!r} is not supported by the offline renderer")
            node = Binary(tok[1], node, operand())
        return node

    def comparison(self) -> object:
        return self._binary(("==", "!=", ">", "<", ">=", "<="), self.additive)

    def additive(self) -> object:
        return self._binary(("+", "-"), self.multiplicative)

    def multiplicative(self) -> object:
        return self._binary(("*", "/"), self.unary)

    def unary(self) -> object:
        tok = self.peek()
        if tok == ("op", "-"):
            self.take()
            return Binary("*", Number(-1.0), self.unary())
        return self.primary()

    def primary(self) -> object:
        tok = self.peek()
        if tok is None:
            raise PromQLError(f"unexpected end of {self.text!r}")
        kind, value = tok
        if kind == "number":
            self.take()
            return Number(float(value))
        if tok == ("op", "("):
            self.take()
            node = self.comparison()
            self.take(")")
            return node
        if tok == ("op", "{"):
            return self.selector(None)
        if kind == "ident":
            nxt = self.peek(1)
            if value in AGGREGATIONS:
                return self.aggregate()
            if nxt == ("op", "("):
                return self.call()
            self.take()
            return self.selector(value)
        raise PromQLError(f"unexpected {value!r} in {self.text!r}")

    def labels(self) -> tuple[str, ...]:
        self.take("(")
        names: list[str] = []
        while self.peek() != ("op", ")"):
            names.append(self.take()[1])
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        return tuple(names)

    def aggregate(self) -> Aggregate:
        op = self.take()[1]
        by = without = None
        if self.peek() in (("ident", "by"), ("ident", "without")):
            which = self.take()[1]
            names = self.labels()
            by, without = (names, None) if which == "by" else (None, names)
        self.take("(")
        expr = self.comparison()
        self.take(")")
        if self.peek() in (("ident", "by"), ("ident", "without")):
            which = self.take()[1]
            names = self.labels()
            by, without = (names, None) if which == "by" else (None, names)
        return Aggregate(op, expr, by, without)

    def call(self) -> Call:
        name = self.take()[1]
        if name not in RANGE_FUNCTIONS | {"histogram_quantile", "time", "clamp_min", "clamp_max"}:
            raise PromQLError(f"function {name!r} is not supported by the offline renderer")
        self.take("(")
        args: list[object] = []
        while self.peek() != ("op", ")"):
            args.append(self.comparison())
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        return Call(name, tuple(args))

    def selector(self, name: str | None) -> Selector:
        matchers: list[tuple[str, str, str]] = [(NAME, "=", name)] if name else []
        if self.peek() == ("op", "{"):
            self.take()
            while self.peek() != ("op", "}"):
                label = self.take()[1]
                op = self.take()[1]
                if op not in ("=", "!=", "=~", "!~"):
                    raise PromQLError(f"bad matcher operator {op!r} in {self.text!r}")
                kind, raw = self.take()
                if kind != "string":
                    raise PromQLError(f"matcher value must be a string in {self.text!r}")
                matchers.append((label, op, raw[1:-1].encode().decode("unicode_escape")))
                if self.peek() == ("op", ","):
                    self.take()
            self.take("}")
        rng = None
        if (tok := self.peek()) is not None and tok[0] == "duration":
            self.take()
            rng = parse_duration(tok[1][1:-1])
        if not matchers:
            raise PromQLError(f"empty selector in {self.text!r}")
        return Selector(tuple(matchers), rng)


def parse(text: str) -> object:
    return _Parser(text).parse()


# --- evaluation ----------------------------------------------------------------------------------


def _matches(labels: dict[str, str], matchers: tuple[tuple[str, str, str], ...]) -> bool:
    for label, op, want in matchers:
        have = labels.get(label, "")
        if op == "=" and have != want or op == "!=" and have == want:
            return False
        if op == "=~" and not re.fullmatch(want, have) or op == "!~" and re.fullmatch(want, have):
            return False
    return True


def _drop_name(labels: Labels) -> Labels:
    return frozenset((k, v) for k, v in labels if k != NAME)


class Evaluator:
    """Evaluates expressions at each scrape of a recording."""

    def __init__(self, recording: Recording) -> None:
        self.rec = recording
        self._series: dict[Labels, tuple[list[float], list[float]]] = {}
        for t, scrape in zip(recording.times, recording.scrapes):
            for (name, labels), value in scrape.items():
                key = frozenset(labels | {(NAME, name)})
                times, values = self._series.setdefault(key, ([], []))
                times.append(t)
                values.append(value)

    def series(self, expr: str) -> dict[Labels, list[tuple[float, float]]]:
        """The expression at every scrape time: output series -> [(t, value)]."""
        node = parse(expr)
        out: dict[Labels, list[tuple[float, float]]] = {}
        for i, t in enumerate(self.rec.times):
            value = self.eval(node, i, t)
            if isinstance(value, dict):
                for labels, v in value.items():
                    if math.isfinite(v):
                        out.setdefault(labels, []).append((t, v))
            elif math.isfinite(value):
                out.setdefault(frozenset(), []).append((t, value))
        return out

    def eval(self, node: object, i: int, t: float) -> Value:
        if isinstance(node, Number):
            return node.value
        if isinstance(node, Selector):
            if node.range is not None:
                raise PromQLError("a range vector must be the argument of a function")
            scrape = self.rec.scrapes[i]
            return {
                frozenset(labels | {(NAME, name)}): v
                for (name, labels), v in scrape.items()
                if _matches({**dict(labels), NAME: name}, node.matchers)
            }
        if isinstance(node, Call):
            return self._call(node, i, t)
        if isinstance(node, Aggregate):
            return self._aggregate(node, i, t)
        if isinstance(node, Binary):
            return self._binary(node, i, t)
        raise PromQLError(f"cannot evaluate {node!r}")

    def _range(self, sel: object, t: float) -> dict[Labels, list[tuple[float, float]]]:
        if not isinstance(sel, Selector) or sel.range is None:
            raise PromQLError("expected a range selector such as metric[5m]")
        out = {}
        for key, (times, values) in self._series.items():
            if not _matches(dict(key), sel.matchers):
                continue
            lo, hi = bisect_right(times, t - sel.range), bisect_right(times, t)
            if hi > lo:
                out[_drop_name(key)] = list(zip(times[lo:hi], values[lo:hi]))
        return out

    def _call(self, node: Call, i: int, t: float) -> Value:
        name, args = node.name, node.args
        if name == "time":
            return t
        if name in RANGE_FUNCTIONS:
            out: Vector = {}
            for labels, points in self._range(args[0], t).items():
                value = _range_function(name, points)
                if value is not None:
                    out[labels] = value
            return out
        if name in ("clamp_min", "clamp_max"):
            vec, bound = self.eval(args[0], i, t), self.eval(args[1], i, t)
            if not isinstance(vec, dict) or isinstance(bound, dict):
                raise PromQLError(f"{name}(vector, scalar) expected")
            pick = max if name == "clamp_min" else min
            return {_drop_name(k): pick(v, bound) for k, v in vec.items()}
        if name == "histogram_quantile":
            q, vec = self.eval(args[0], i, t), self.eval(args[1], i, t)
            if isinstance(q, dict) or not isinstance(vec, dict):
                raise PromQLError("histogram_quantile(scalar, vector) expected")
            return _histogram_quantile(q, vec)
        raise PromQLError(f"function {name!r} is not supported")

    def _aggregate(self, node: Aggregate, i: int, t: float) -> Vector:
        vec = self.eval(node.expr, i, t)
        if not isinstance(vec, dict):
            raise PromQLError(f"{node.op} needs a vector")
        groups: dict[Labels, list[float]] = {}
        for labels, v in vec.items():
            if node.by is not None:
                key = frozenset((k, val) for k, val in labels if k in node.by)
            elif node.without is not None:
                drop = set(node.without) | {NAME}
                key = frozenset((k, val) for k, val in labels if k not in drop)
            else:
                key = frozenset()  # no grouping: one result
            groups.setdefault(key, []).append(v)
        fn: dict[str, Callable[[list[float]], float]] = {
            "sum": sum,
            "max": max,
            "min": min,
            "avg": lambda xs: sum(xs) / len(xs),
            "count": lambda xs: float(len(xs)),
        }
        return {k: fn[node.op](vs) for k, vs in groups.items()}

    def _binary(self, node: Binary, i: int, t: float) -> Value:
        left, right = self.eval(node.left, i, t), self.eval(node.right, i, t)
        op = node.op
        compare = op in ("==", "!=", ">", "<", ">=", "<=")
        if not isinstance(left, dict) and not isinstance(right, dict):
            if compare:
                raise PromQLError("comparisons between scalars need `bool`, which is not supported")
            return _arith(op, left, right)
        if isinstance(left, dict) and isinstance(right, dict):
            rights = {_drop_name(k): v for k, v in right.items()}
            out: Vector = {}
            for k, v in left.items():
                key = _drop_name(k)
                if key not in rights:
                    continue
                if compare:
                    if _compare(op, v, rights[key]):
                        out[k if op == "==" else key] = v
                else:
                    out[key] = _arith(op, v, rights[key])
            return out
        if isinstance(left, dict):
            scalar = float(right)  # type: ignore[arg-type]
            if compare:
                return {k: v for k, v in left.items() if _compare(op, v, scalar)}
            return {_drop_name(k): _arith(op, v, scalar) for k, v in left.items()}
        vector = right
        scalar = float(left)
        if compare:
            return {k: v for k, v in vector.items() if _compare(op, scalar, v)}  # type: ignore[union-attr]
        return {_drop_name(k): _arith(op, scalar, v) for k, v in vector.items()}  # type: ignore[union-attr]


def _arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b != 0 else (math.nan if a == 0 else math.copysign(math.inf, a))
    raise PromQLError(f"operator {op!r} is not supported")


def _compare(op: str, a: float, b: float) -> bool:
    return {"==": a == b, "!=": a != b, ">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]


def _range_function(name: str, points: list[tuple[float, float]]) -> float | None:
    if name == "avg_over_time":
        return sum(v for _, v in points) / len(points)
    if name == "changes":
        return float(sum(1 for (_, a), (_, b) in zip(points, points[1:]) if a != b))
    if len(points) < 2:
        return None
    delta = 0.0
    for (_, a), (_, b) in zip(points, points[1:]):
        delta += b - a if b >= a else b  # a counter reset restarts from 0
    if name == "increase":
        return delta
    span = points[-1][0] - points[0][0]
    return delta / span if span > 0 else None


def _histogram_quantile(q: float, vec: Vector) -> Vector:
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, v in vec.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        key = frozenset((k, val) for k, val in labels if k not in ("le", NAME))
        groups.setdefault(key, []).append((math.inf if le in ("+Inf", "Inf") else float(le), v))
    out: Vector = {}
    for key, buckets in groups.items():
        buckets.sort()
        if not buckets or buckets[-1][0] != math.inf:
            continue
        total = buckets[-1][1]
        if total <= 0:
            continue
        if q < 0 or q > 1:
            out[key] = -math.inf if q < 0 else math.inf
            continue
        rank = q * total
        idx = bisect_left([c for _, c in buckets], rank)
        idx = min(idx, len(buckets) - 1)
        if buckets[idx][0] == math.inf:
            out[key] = buckets[-2][0] if len(buckets) > 1 else math.nan
            continue
        upper, count = buckets[idx]
        lower, below = (buckets[idx - 1] if idx > 0 else (0.0, 0.0))
        in_bucket = count - below
        out[key] = upper if in_bucket <= 0 else lower + (upper - lower) * (rank - below) / in_bucket
    return out
