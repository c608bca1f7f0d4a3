"""The performance gate: is CURRENT slower than BASELINE on a metric that matters, beyond noise?

A metric regresses when all of these hold:

1. the median of CURRENT's samples exceeds BASELINE's by more than ``max_regression`` (ratio test);
2. the absolute change exceeds ``min_delta_us`` (default: 0.2 % of the baseline's median step
   time), so an op worth nothing cannot fail a build by doubling; for the memory metrics (bytes)
   ``min_delta_bytes`` (default 1 MiB), for MFU (percent of peak) ``min_delta_pct`` (default 1 point);
3. when both sides have enough samples for it, a two-sided Mann–Whitney U test says the two
   sample sets differ with p < ``alpha`` (default 0.002, asv's level). With fewer samples than
   the test needs to ever reach ``alpha``, the gate decides on 1 and 2 alone and says so.

Medians, not means: one slow warm-up step must not decide a gate. For a metric where more is better
(MFU, ``mfu:KEY``) the test runs the other way: CURRENT regresses when its median falls below
BASELINE's by more than ``max_regression`` of the current value (baseline / current > 1 + max_regression).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from npudiag.profiling.analysis.metrics import (
    DEFAULT_METRICS,
    StepWindow,
    canonical_metric,
    higher_is_better,
    known_metric,
    metric_unit,
    samples,
    top_op_keys,
)
from npudiag.profiling.analysis.stats import mann_whitney_u, smallest_p
from npudiag.profiling.analysis.window import describe_steps, parse_steps, steps_spec


@dataclass(frozen=True)
class MetricRule:
    max_regression: float  # fraction: 0.05 is 5 %
    min_delta_us: float | None  # None: 0.2 % of the baseline median step time
    enabled: bool = True
    min_delta_bytes: float | None = None  # memory metrics; None: MIN_DELTA_BYTES
    min_delta_pct: float | None = None  # MFU metrics, in percentage points; None: MIN_DELTA_PCT


MIN_DELTA_BYTES = float(1 << 20)
MIN_DELTA_PCT = 1.0


@dataclass(frozen=True)
class GateConfig:
    max_regression: float = 0.05
    alpha: float = 0.002
    top_ops: int = 10
    by: str = "type"
    min_delta_us: float | None = None
    min_delta_step_fraction: float = 0.002
    metrics: tuple[str, ...] = ()  # extra metrics (op:KEY, api:NAME, step_breakdown columns)
    per_metric: dict[str, MetricRule] = field(default_factory=dict)
    steps: StepWindow = None

    def rule(self, metric: str) -> MetricRule:
        return self.per_metric.get(metric, MetricRule(self.max_regression, self.min_delta_us))


@dataclass
class Verdict:
    metric: str
    status: str  # regression, improvement, pass, not_significant
    base_n: int
    cur_n: int
    base_median: float  # in ``unit``
    cur_median: float
    delta: float
    ratio: float | None  # cur / base; None when the baseline is 0 and current is not
    max_regression: float
    min_delta: float
    method: str  # mann-whitney (exact|normal), or threshold-only
    p_value: float | None
    reason: str
    unit: str = "us"  # us, bytes for the memory metrics, pct for MFU
    higher_is_better: bool = False  # MFU: a fall is the regression

    @property
    def failed(self) -> bool:
        return self.status == "regression"

    @property
    def confidence(self) -> float | None:
        return None if self.p_value is None else 1.0 - self.p_value

    def to_dict(self) -> dict[str, Any]:
        """The verdict with its unit in the value keys: ``base_median_us`` or ``base_median_bytes``."""
        values = ("base_median", "cur_median", "delta", "min_delta")
        d = {k if k not in values else f"{k}_{self.unit}": v for k, v in self.__dict__.items()}
        d["confidence"] = self.confidence
        d["failed"] = self.failed
        return d


@dataclass
class GateVerdicts:
    verdicts: list[Verdict]
    warnings: list[str]
    config: GateConfig

    @property
    def failed(self) -> bool:
        return any(v.failed for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {
            "passed": not self.failed,
            "regressions": [v.metric for v in self.verdicts if v.failed],
            "method": {
                "max_regression": c.max_regression,
                "alpha": c.alpha,
                "test": "Mann-Whitney U, two-sided",
                "statistic": "median",
            },
            "warnings": self.warnings,
            "metrics": [v.to_dict() for v in self.verdicts],
        }


def parse_percent(text: str | float | int) -> float:
    """``5%`` or a fraction below 1 (``0.05``) -> 0.05. A bare number of 1 or more is refused: ``1``
    could mean 1 % or +100 %, and a gate that guesses wrong passes a regression."""
    if isinstance(text, bool):
        raise ValueError(f"expected a percentage such as 5% or a fraction such as 0.05, got {text!r}")
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
    except ValueError:
        raise ValueError(f"expected a percentage such as 5% or a fraction such as 0.05, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a non-negative percentage such as 5% or 0.05, got {text!r}")
    if not s.endswith("%") and value >= 1:
        pct, frac, whole = _plain(value), _plain(value / 100), _plain(value * 100)
        raise ValueError(
            f"{s} is ambiguous: write {pct}% for {pct} percent (or the fraction {frac}), "
            f"or {whole}% for +{whole} percent"
        )
    return value


def _plain(x: float) -> str:
    return f"{x:.10g}"


_GATE_KEYS = {"max_regression", "alpha", "top_ops", "by", "min_delta_us", "metrics", "steps"}
_METRIC_KEYS = {"max_regression", "min_delta_us", "min_delta_bytes", "min_delta_pct", "enabled"}


def config_from(data: dict[str, Any], path: Path | str, base: GateConfig | None = None) -> GateConfig:
    """The settings of ``data``, the contents of ``npudiag-gate.toml`` (``path``, named in errors)::

    [gate]
    max_regression = "5%"
    alpha = 0.002
    top_ops = 10
    metrics = ["api:aclrtMemcpy", "op:MatMulV3"]
    steps = "3:"

    [metric.step_time_us]
    max_regression = "2%"

    [metric."op:TransData"]
    enabled = false
    """

    unknown = set(data) - {"gate", "metric"}
    if unknown:
        raise ValueError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}; expected [gate] and [metric.NAME]")
    gate, metrics = data.get("gate", {}), data.get("metric", {})
    for name, section in (("[gate]", gate), ("[metric]", metrics)):
        if not isinstance(section, dict):
            raise ValueError(f"{path}: {name} must be a table, not {_toml_kind(section)}")
    bad = set(gate) - _GATE_KEYS
    if bad:
        raise ValueError(
            f"{path}: unknown [gate] key(s) {', '.join(sorted(bad))}; expected {', '.join(sorted(_GATE_KEYS))}"
        )
    # each [gate] setting checked by its parser, in the table's order (the first bad one is the error)
    changes = {key: parse(path, gate[key]) for key, parse in _GATE_SETTINGS.items() if key in gate}
    cfg = replace(base or GateConfig(), **changes)
    return with_metric_rules(
        cfg, {canonical_metric(given): _metric_rule(path, given, opts) for given, opts in metrics.items()}
    )


def _gate_by(path: Path | str, value: Any) -> str:
    if value not in ("type", "name"):
        raise ValueError(f'{path}: [gate] by: expected "type" or "name", got {value!r}')
    return value


def _gate_metrics(path: Path | str, listed: Any) -> tuple[str, ...]:
    if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
        raise ValueError(
            f'{path}: [gate] metrics: expected a list of metric names such as ["op:MatMulV3"], not {_toml_kind(listed)}'
        )
    return tuple(canonical_metric(m) for m in listed)


def _gate_steps(path: Path | str, value: Any) -> Any:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ValueError(f'{path}: [gate] steps: expected a window such as "3:" or "3:9", not {_toml_kind(value)}')
    return parse_steps(str(value))


# the [gate] settings: key -> (path, value) -> the checked value GateConfig takes
_GATE_SETTINGS: dict[str, Callable[[Path | str, Any], Any]] = {
    "max_regression": lambda path, v: _percent_in(path, "[gate] max_regression", v),
    "alpha": lambda path, v: check_alpha(_number(path, "[gate] alpha", v), f"{path}: [gate] alpha"),
    "top_ops": lambda path, v: check_top_ops(_number(path, "[gate] top_ops", v, whole=True), f"{path}: [gate] top_ops"),
    "by": _gate_by,
    "min_delta_us": lambda path, v: check_min_delta(
        _number(path, "[gate] min_delta_us", v), f"{path}: [gate] min_delta_us"
    ),
    "metrics": _gate_metrics,
    "steps": _gate_steps,
}


def _metric_rule(path: Path | str, given: str, opts: Any) -> dict[str, Any]:
    """One [metric.NAME] table, checked: a known metric, known keys, each value of its kind."""
    where = f"[metric.{given}]"
    if not isinstance(opts, dict):
        raise ValueError(f"{path}: {where} must be a table")
    bad = set(opts) - _METRIC_KEYS
    if bad:
        raise ValueError(
            f"{path}: unknown key(s) {', '.join(sorted(bad))} in {where}; expected {', '.join(sorted(_METRIC_KEYS))}"
        )
    if not known_metric(canonical_metric(given)):
        raise ValueError(f"{path}: {where}: unknown metric name")
    if "max_regression" in opts:
        _percent_in(path, f"{where} max_regression", opts["max_regression"])
    for key in ("min_delta_us", "min_delta_bytes", "min_delta_pct"):
        if key in opts:
            check_min_delta(_number(path, f"{where} {key}", opts[key]), f"{path}: {where} {key}")
    if "enabled" in opts and not isinstance(opts["enabled"], bool):
        raise ValueError(f"{path}: {where} enabled: expected true or false, not {_toml_kind(opts['enabled'])}")
    return opts


MAX_TOP_OPS = 1000


def _toml_kind(value: Any) -> str:
    kinds = (
        (bool, "a boolean"),
        (dict, "a table"),
        (list, "an array"),
        (str, "a string"),
        (int, "an integer"),
        (float, "a number"),
    )
    return next((f"{name} ({value!r})"[:80] for t, name in kinds if isinstance(value, t)), type(value).__name__)


def _number(path: Path, key: str, value: Any, whole: bool = False) -> float:
    """A number of the TOML file: finite (TOML has inf and nan), a whole number where ``whole``."""
    ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        raise ValueError(f"{path}: {key}: expected a {'whole ' if whole else ''}number, not {_toml_kind(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{path}: {key}: expected a finite number, not {value}")
    return value


def check_alpha(value: float, where: str = "alpha") -> float:
    """The test's significance level: strictly between 0 and 1 (0 would never find a change significant)."""
    if not (math.isfinite(value) and 0 < value < 1):
        raise ValueError(
            f"{where}: the significance level must be between 0 and 1 (exclusive), e.g. 0.002; got {value}"
        )
    return float(value)


def check_top_ops(value: int, where: str = "top_ops") -> int:
    if not 0 <= value <= MAX_TOP_OPS:
        raise ValueError(f"{where}: gate between 0 and {MAX_TOP_OPS} of the hottest ops; got {value}")
    return int(value)


def check_min_delta(value: float, where: str = "min_delta_us") -> float:
    """A change smaller than this is ignored: finite and not negative (NaN once let every regression pass)."""
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: expected a number of 0 or more, got {value}")
    return float(value)


def _percent_in(path: Path, key: str, value: Any) -> float:
    try:
        return parse_percent(value)
    except ValueError as exc:
        raise ValueError(f"{path}: {key}: {exc}") from None


def with_metric_rules(cfg: GateConfig, per: dict[str, dict[str, Any]]) -> GateConfig:
    rules = dict(cfg.per_metric)
    for name, opts in per.items():
        rules[name] = MetricRule(
            parse_percent(opts["max_regression"]) if "max_regression" in opts else cfg.max_regression,
            float(opts["min_delta_us"]) if "min_delta_us" in opts else cfg.min_delta_us,
            bool(opts.get("enabled", True)),
            float(opts["min_delta_bytes"]) if "min_delta_bytes" in opts else None,
            float(opts["min_delta_pct"]) if "min_delta_pct" in opts else None,
        )
    return replace(cfg, per_metric=rules)


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else 0.0


def decide(
    metric: str,
    base: np.ndarray,
    cur: np.ndarray,
    rule: MetricRule,
    min_delta: float,
    alpha: float,
    unit: str = "us",
    better_high: bool = False,
) -> Verdict:
    """The verdict on one metric; ``min_delta`` is the floor in ``unit``; ``better_high``: more is better (MFU)."""
    bm, cm = _median(base), _median(cur)
    delta = cm - bm
    ratio = cm / bm if bm > 0 else (1.0 if cm == 0 else None)
    # how much worse, as a factor over 1: current / baseline for a cost, baseline / current for MFU
    if better_high:
        worse_by = bm / cm if cm > 0 else (1.0 if bm == 0 else None)
        loss = -delta
    else:
        worse_by, loss = ratio, delta
    worse = (worse_by is None or worse_by > 1.0 + rule.max_regression) and loss > min_delta
    better = worse_by is not None and worse_by < 1.0 / (1.0 + rule.max_regression) and -loss > min_delta
    testable = len(base) > 0 and len(cur) > 0 and smallest_p(len(base), len(cur)) < alpha
    p, method = None, "threshold-only"
    if testable:
        mw = mann_whitney_u(cur, base)
        p, method = mw.p, f"mann-whitney ({mw.method})"
    significant = p is not None and p < alpha
    change = "new (baseline 0)" if ratio is None else f"{(ratio - 1.0) * 100:+.1f}%"
    limit = f"{'-' if better_high else '+'}{rule.max_regression * 100:g}%"
    if worse and (significant or not testable):
        status = "regression"
        why = f"median {change} {'<' if better_high else '>'} {limit}" + (
            f", p={p:.2g} < {alpha:g}" if significant else ", threshold only"
        )
    elif worse:
        status, why = "not_significant", f"median {change} but p={p:.2g} >= {alpha:g}: within noise"
    elif better and (significant or not testable):
        status, why = "improvement", f"median {change}"
    else:
        status = "pass"
        below_floor = worse_by is not None and worse_by > 1.0 + rule.max_regression
        why = _pass_reason(change, limit, loss > min_delta or ratio is None, below_floor, abs(delta), min_delta, unit)
    return Verdict(
        metric,
        status,
        len(base),
        len(cur),
        bm,
        cm,
        delta,
        ratio,
        rule.max_regression,
        min_delta,
        method,
        p,
        why,
        unit,
        better_high,
    )


def _pass_reason(
    change: str, limit: str, beyond_floor: bool, below_floor: bool, moved: float, min_delta: float, unit: str
) -> str:
    """Why a metric passes: within its limit, or over it by less than the floor (``moved`` of ``min_delta``)."""
    if below_floor:
        return f"median {change} but only {moved:.1f} {unit}, below the {min_delta:.1f} {unit} floor"
    return f"median {change}, within {limit}" if beyond_floor else f"median {change}"


def judge(
    base_runs: Sequence[dict[str, pa.Table]], cur_runs: Sequence[dict[str, pa.Table]], config: GateConfig | None = None
) -> GateVerdicts:
    """Gate every default metric, the top ops of both sides and any extra metric named in ``config``."""
    cfg = config or GateConfig()
    names = _metric_names(base_runs, cur_runs, cfg)
    granularity = {
        side: {_granularity(t) for t in runs} for side, runs in (("baseline", base_runs), ("current", cur_runs))
    }
    if granularity["baseline"] != granularity["current"] or len(granularity["baseline"]) > 1:
        desc = {side: " and ".join(sorted(g)) for side, g in granularity.items()}
        raise ValueError(
            f"the baseline has {desc['baseline']} samples and the current "
            f"{desc['current']}: a gate compares like with like "
            "(profile both with steps, or compare whole runs: repeated runs without step ids on both sides)"
        )
    if cfg.steps is not None:
        _check_window(cfg.steps, granularity, base_runs, cur_runs)
    step_base = samples(base_runs, "step_time_us", by=cfg.by, window=cfg.steps)
    floor_default = cfg.min_delta_step_fraction * _median(step_base)
    verdicts = []
    for m in names:
        rule = cfg.rule(m)
        if not rule.enabled:
            continue
        b = samples(base_runs, m, by=cfg.by, window=cfg.steps)
        c = samples(cur_runs, m, by=cfg.by, window=cfg.steps)
        if len(b) == 0 or len(c) == 0:
            side = "baseline" if len(b) == 0 else "current"
            why = (
                (
                    "no kernel of that op type has a known MFU there (FLOPs or peak unknown: "
                    "see op_perf.parquet's flops_note)"
                )
                if m.startswith("mfu:")
                else "is the --steps window outside its steps?"
            )
            raise ValueError(f"no samples of {m} in the {side} ({why})")
        unit = metric_unit(m)
        floor = _floor(rule, unit, floor_default)
        verdicts.append(decide(m, b, c, rule, floor, cfg.alpha, unit, higher_is_better(m)))
    return GateVerdicts(verdicts, _too_few_samples(verdicts, cfg), cfg)


def _metric_names(base_runs, cur_runs, cfg: GateConfig) -> list[str]:
    """The default metrics, the top ops of both sides, then the config's own; ValueError on an unknown name."""
    names = list(DEFAULT_METRICS)
    ops = top_op_keys(base_runs, cfg.top_ops, cfg.by) + top_op_keys(cur_runs, cfg.top_ops, cfg.by)
    names += [f"op:{k}" for k in dict.fromkeys(ops)]
    names += [m for m in cfg.metrics if m not in names]
    for m in names:
        if not known_metric(m):
            raise ValueError(f"unknown metric {m!r}")
    return names


def _floor(rule: MetricRule, unit: str, floor_default: float) -> float:
    """The smallest change that counts: the metric's own floor, else its unit's default (bytes, percent),
    else a share of the baseline's median step."""
    if unit == "bytes":
        return rule.min_delta_bytes if rule.min_delta_bytes is not None else MIN_DELTA_BYTES
    if unit == "pct":
        return rule.min_delta_pct if rule.min_delta_pct is not None else MIN_DELTA_PCT
    return rule.min_delta_us if rule.min_delta_us is not None else floor_default


def _too_few_samples(verdicts: list[Verdict], cfg: GateConfig) -> list[str]:
    """A warning when the metrics were decided on the threshold alone (too few samples for the test)."""
    short = [v for v in verdicts if v.method == "threshold-only"]
    if not short:
        return []
    v, need = short[0], _samples_needed(cfg.alpha)
    return [
        f"{v.base_n} baseline and {v.cur_n} current sample(s) per metric: too few for the "
        f"Mann-Whitney test at p < {cfg.alpha:g} "
        f"(needs about {need} per side, from steps or repeated runs); decided on the "
        f"{cfg.max_regression * 100:g}% threshold alone"
    ]


def _check_window(window: StepWindow, granularity: dict[str, set[str]], base_runs, cur_runs) -> None:
    """A --steps window must hold steps of both sides: never whole runs gated as if cut."""
    lo, hi = window
    spec = steps_spec(window)
    if granularity["baseline"] == {"whole-run"}:
        raise ValueError(f"--steps {spec}: these profiles carry no step ids, so no window can be cut; drop --steps")
    for side, runs in (("baseline", base_runs), ("current", cur_runs)):
        ids = sorted({s for t in runs for s in t["step_breakdown"]["step"].drop_null().to_pylist()})
        inside = [s for s in ids if (lo is None or s >= lo) and (hi is None or s <= hi)]
        if ids and not inside:
            raise ValueError(f"--steps {spec}: no step of the {side} is in that window; it has {describe_steps(ids)}")


def _granularity(tables: dict[str, pa.Table]) -> str:
    """``per-step`` when the run's breakdown has step ids, else ``whole-run`` (one sample per run)."""
    sb = tables.get("step_breakdown")
    return "per-step" if sb is not None and sb.num_rows and sb["step"].null_count < sb.num_rows else "whole-run"


def _samples_needed(alpha: float) -> int:
    n = 1
    while smallest_p(n, n) >= alpha and n < 1000:
        n += 1
    return n
