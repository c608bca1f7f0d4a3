"""The analysis window: restrict every table to some steps or to a time range.

``--steps 10:100`` keeps steps 10 to 100 inclusive as the step breakdown counts them (kernels by
their Step Id, everything else by the step slot its time falls in:
:class:`~npudiag.profiling.analysis.step_breakdown.StepSlots`), so a step reads the same with or
without the window. ``--time 1.5s:3.0s`` keeps what starts in that range, measured from each rank's
first device task (the start of its span).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.analysis.step_breakdown import StepSlots, row_ns, step_slots

_TIME = re.compile(r"^\s*([0-9.]+)\s*(us|µs|ms|s)?\s*$")
_UNIT = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1e6}


class WindowError(ValueError):
    """The window holds nothing of this profile (the message names what the profile has)."""


class CutError(ValueError):
    """The profile cannot be cut that way (steps asked of kernels without step ids, time of none)."""


@dataclass(frozen=True)
class Window:
    """The part of a profile to analyse: ``steps`` (first, last) step ids and/or ``time_us`` (start,
    end) microseconds from each rank's first device task; either side of each may be open (None)."""

    steps: tuple[int | None, int | None] | None = None
    time_us: tuple[float | None, float | None] | None = None

    @classmethod
    def of(cls, steps=None, time=None) -> Window:
        """From ``"10:100"`` / (10, 100) steps and ``"1.5s:3s"`` / (µs, µs) time; ValueError names the option."""
        return cls(
            parse_steps(steps)
            if isinstance(steps, str)
            else (_checked_steps(*steps, steps_spec(steps)) if steps is not None else None),
            parse_time(time) if isinstance(time, str) else (tuple(time) if time is not None else None),
        )

    @property
    def active(self) -> bool:
        return self.steps is not None or self.time_us is not None

    @property
    def option(self) -> str:
        """The option a problem with this window is blamed on."""
        return "steps" if self.steps is not None else "time"

    def cut(self, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
        """``tables`` restricted to the window (unchanged when it is not active): see :func:`apply_window`."""
        return apply_window(tables, self.steps, self.time_us) if self.active else tables


def parse_steps(spec: str) -> tuple[int | None, int | None]:
    """``"10:100"`` -> (10, 100); ``"10:"`` and ``":100"`` leave one side open; ``"7"`` is one step."""
    first, sep, last = spec.partition(":")
    try:
        lo = int(first) if first.strip() else None
        hi = int(last) if last.strip() else None
    except ValueError:
        raise ValueError(f"--steps {spec!r}: expected FIRST:LAST step ids, e.g. 10:100") from None
    if not sep:
        hi = lo
    return _checked_steps(lo, hi, spec)


def _checked_steps(lo: int | None, hi: int | None, spec: str) -> tuple[int | None, int | None]:
    for v in (lo, hi):
        if v is not None and not -(2**62) < v < 2**62:
            raise ValueError(f"--steps {spec!r}: {v} is not a step id")
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"--steps {spec!r}: last step is before the first")
    return lo, hi


def parse_time(spec: str) -> tuple[float | None, float | None]:
    """``"1.5s:3.0s"`` -> (1.5e6, 3.0e6) microseconds from each rank's first device task; a bare number is seconds."""
    first, sep, last = spec.partition(":")
    if not sep:
        raise ValueError(f"--time {spec!r}: expected START:END, e.g. 1.5s:3.0s")
    out = []
    for part in (first, last):
        if not part.strip():
            out.append(None)
            continue
        m = _TIME.match(part)
        if not m:
            raise ValueError(f"--time {spec!r}: {part!r} is not a time (use us, ms or s)")
        try:
            value = float(m.group(1)) * _UNIT[m.group(2)]
        except ValueError:
            raise ValueError(f"--time {spec!r}: {part!r} is not a time (use us, ms or s)") from None
        if not math.isfinite(value) or value > 1e15:
            raise ValueError(f"--time {spec!r}: {part!r} is beyond any profile")
        out.append(value)
    lo, hi = out
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"--time {spec!r}: the end is before the start")
    return lo, hi


# tables cut by the time of each row: (exact ns column, µs column)
_AT = {
    "api_calls": ("start_ns", "start_us"),
    "copies": ("start_ns", "start_us"),
    "host_ops": ("start_ns", "start_us"),
    "ranges": ("start_ns", "start_us"),
    "comm_tasks": ("start_ns", "start_us"),
    "comm_ops": ("", "start_us"),
    "memory_timeline": ("ts_ns", "ts_us"),
}
# tables whose rows name their step as communication.json does ("step13")
_BY_STEP_NAME = ("comm_links", "comm_bandwidth")
_STEP_NAME = re.compile(r"^step(-?[0-9]{1,18})$")


class _Keep:
    """What one rank keeps of the window: its kernels, and the instants and time ranges in it."""

    def kernels(self, k: pa.Table) -> np.ndarray:
        raise NotImplementedError

    def at(self, ns: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def meets(self, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
        """Which ranges [lo, hi] share some instant with the window."""
        raise NotImplementedError


class _StepKeep(_Keep):
    """The chosen steps' slots (:class:`StepSlots`): what an unwindowed analysis counts in those steps."""

    def __init__(self, slots: StepSlots, lo: int | None, hi: int | None):
        ids = np.array(slots.ids, np.int64)
        self.slots = slots
        self.chosen = (ids >= (lo if lo is not None else -(2**63))) & (ids <= (hi if hi is not None else 2**63 - 1))
        # chosen slots counted in time order, to tell whether a range meets one
        self.cum = np.concatenate([[0], np.cumsum(self.chosen[slots.order])])

    def kernels(self, k: pa.Table) -> np.ndarray:
        return self.chosen[self.slots.kpos] if len(self.slots.ids) else np.zeros(k.num_rows, bool)

    def at(self, ns: np.ndarray) -> np.ndarray:
        return self.chosen[self.slots.at(ns)] if len(self.slots.ids) else np.zeros(len(ns), bool)

    def meets(self, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
        if not len(self.slots.ids):
            return np.zeros(len(lo_ns), bool)
        a, b = self.slots.slot_rank(lo_ns), self.slots.slot_rank(hi_ns)
        return self.cum[np.maximum(a, b) + 1] - self.cum[np.minimum(a, b)] > 0


class _TimeKeep(_Keep):
    """[lo, hi] ns: what starts in that range (a task may end after it)."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi

    def kernels(self, k: pa.Table) -> np.ndarray:
        return self.at(row_ns(k))

    def at(self, ns: np.ndarray) -> np.ndarray:
        return (ns >= self.lo) & (ns <= self.hi)

    def meets(self, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
        return (lo_ns <= self.hi) & (hi_ns >= self.lo)


class _AllKeep(_Keep):
    """Both windows at once (``--steps`` and ``--time``): what each keeps."""

    def __init__(self, keeps: list[_Keep]):
        self.keeps = keeps

    def kernels(self, k: pa.Table) -> np.ndarray:
        return np.logical_and.reduce([x.kernels(k) for x in self.keeps])

    def at(self, ns: np.ndarray) -> np.ndarray:
        return np.logical_and.reduce([x.at(ns) for x in self.keeps])

    def meets(self, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
        return np.logical_and.reduce([x.meets(lo_ns, hi_ns) for x in self.keeps])


def _groups(table: pa.Table) -> dict[object, np.ndarray]:
    """Row indices of each rank of ``table`` (None: rows with no rank)."""
    if table.num_rows == 0:
        return {}
    col = table["rank"]
    codes = pc.fill_null(col, -(2**31)).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(codes, kind="stable")
    values, first = np.unique(codes[order], return_index=True)
    bounds = np.append(first, len(codes))
    return {(None if v == -(2**31) else int(v)): order[bounds[i] : bounds[i + 1]] for i, v in enumerate(values)}


def _device_tasks_ns(kernels: pa.Table, copies: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) ns of the device tasks of one rank: kernels and device copies (the span's tasks)."""
    if copies.num_rows:
        copies = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False))
    starts, ends = [], []
    for t in (kernels, copies):
        if t.num_rows:
            s = row_ns(t)
            d = pc.fill_null(t["duration_us"], 0.0).to_numpy(zero_copy_only=False)
            ok = (s > -(2**62)) & np.isfinite(d)
            starts.append(s[ok])
            ends.append(s[ok] + np.round(np.maximum(d[ok], 0.0) * 1000).astype(np.int64))
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts), np.concatenate(ends)


def apply_window(
    tables: dict[str, pa.Table],
    steps: tuple[int | None, int | None] | None = None,
    time: tuple[float | None, float | None] | None = None,
) -> dict[str, pa.Table]:
    """Tables restricted to the window; CutError when the profile cannot be cut that way, WindowError
    when the window holds none of its kernels.

    ``steps`` keeps each rank's chosen steps as every per-step figure counts them (a kernel by its
    Step Id, everything else by the step slot its time falls in: :class:`StepSlots`), so a step
    reads the same with or without the window. ``time`` (µs from each rank's first device task,
    the start of its span) keeps what starts in that range. Whole-profile totals the profiler
    wrote itself (op_statistic, api_statistic, torch_ops) cannot be cut and are kept as read."""
    kernels, copies, steps_t = tables["kernels"], tables["copies"], tables["steps"]
    if steps is not None and kernels.num_rows and kernels["step"].null_count == kernels.num_rows:
        raise CutError("--steps: this profile's kernels carry no step ids (use --time instead)")
    if time is not None and kernels.num_rows + copies.num_rows == 0:
        raise CutError("--time: no device tasks to measure the profile start from")
    groups = {
        name: _groups(t) for name, t in tables.items() if t is not None and "rank" in t.column_names and t.num_rows
    }
    masks = {name: np.zeros(tables[name].num_rows, bool) for name in groups}
    spans: list[float] = []
    kept_steps: dict[object, set[int]] = {}
    clip: dict[object, tuple[int, int]] = {}
    for rank, kidx in groups.get("kernels", {}).items():
        k = kernels.take(pa.array(kidx))
        c = copies.take(pa.array(groups.get("copies", {}).get(rank, np.zeros(0, np.int64))))
        keeps: list[_Keep] = []
        if steps is not None:
            st = steps_t.take(pa.array(groups.get("steps", {}).get(rank, np.zeros(0, np.int64))))
            keeps.append(_StepKeep(step_slots(k, st), *steps))
        span = None
        if time is not None:
            s, e = _device_tasks_ns(k, c)
            if not len(s):
                continue
            origin = int(s.min())
            spans.append((int(e.max()) - origin) / 1000.0)
            lo = origin + (round(time[0] * 1000) if time[0] is not None else -(2**62))
            hi = origin + round(time[1] * 1000) if time[1] is not None else 2**62
            keeps.append(span := _TimeKeep(lo, hi))
        keep = keeps[0] if len(keeps) == 1 else _AllKeep(keeps)
        kmask = keep.kernels(k)
        masks["kernels"][kidx] = kmask
        kept_steps[rank] = set(k.filter(pa.array(kmask))["step"].drop_null().to_pylist()) if kmask.any() else set()
        for name, (exact, approx) in _AT.items():
            idx = groups.get(name, {}).get(rank)
            if idx is not None:
                t = tables[name].take(pa.array(idx))
                masks[name][idx] = keep.at(row_ns(t, exact, approx))
        _keep_held(tables, groups, masks, rank, keep)
        if span is not None and kmask.any():
            _, ke = _device_tasks_ns(
                k.filter(pa.array(kmask)), c.filter(pa.array(keep.at(row_ns(c)))) if c.num_rows else c
            )
            clip[rank] = (span.lo, max(span.hi, int(ke.max()) if len(ke) else span.hi))
    out = dict(tables)
    for name, mask in masks.items():
        if name not in ("steps", *_BY_STEP_NAME):
            out[name] = tables[name].filter(pa.array(mask))
    if kernels.num_rows and out["kernels"].num_rows == 0 and not _has_device_copies(out["copies"]):
        raise WindowError(_empty_window(kernels, steps_t, steps, time, max(spans, default=0.0)))
    for name in ("steps", *_BY_STEP_NAME):
        if name in groups:
            out[name] = _by_step(tables[name], groups[name], kept_steps, name == "steps")
    if clip:
        out["steps"] = _clipped(out["steps"], clip)
    return out


def _has_device_copies(copies: pa.Table) -> bool:
    return copies.num_rows > 0 and bool(pc.any(pc.equal(copies["side"], "device")).as_py())


def _keep_held(tables: dict[str, pa.Table], groups: dict, masks: dict, rank: object, keep: _Keep) -> None:
    """Memory blocks held at some instant of the window (allocated before its end, or before the
    profile, and released after its start, or never while profiling), and the AI Core clock
    samples in force at some instant of it (each holds until the next)."""
    idx = groups.get("op_memory", {}).get(rank)
    if idx is not None:
        t = tables["op_memory"].take(pa.array(idx))
        alloc = row_ns(t, "alloc_ns", "alloc_us")
        release = row_ns(t, "release_ns", "release_us")
        release = np.where(release == -(2**62), 2**62, release)  # never released while profiling
        masks["op_memory"][idx] = keep.meets(alloc, release)
    idx = groups.get("aicore_freq", {}).get(rank)
    if idx is not None:
        t = tables["aicore_freq"].take(pa.array(idx))
        ts = row_ns(t, "ts_ns", "ts_us")
        order = np.argsort(ts, kind="stable")
        until = np.empty(len(ts), np.int64)
        until[order] = np.append(ts[order][1:], 2**62)
        masks["aicore_freq"][idx] = keep.meets(ts, until)


def _step_of_name(col: pa.ChunkedArray) -> np.ndarray:
    """communication.json's step names ("step13") as ids; -2**62 where a name is no step."""
    col = pc.fill_null(col, "")
    names = pc.unique(col)
    ids = [int(m.group(1)) if (m := _STEP_NAME.match(n or "")) else -(2**62) for n in names.to_pylist()]
    pos = pc.index_in(col, value_set=names).to_numpy(zero_copy_only=False)
    return np.array(ids, np.int64)[pos]


def _by_step(table: pa.Table, groups: dict, kept: dict[object, set[int]], numeric: bool) -> pa.Table:
    """The rows of the steps each rank kept (the steps table, and the per-step communication tables)."""
    ids = table["step"].cast(pa.int64()) if numeric else None
    step = pc.fill_null(ids, -(2**62)).to_numpy(zero_copy_only=False) if numeric else _step_of_name(table["step"])
    mask = np.zeros(table.num_rows, bool)
    for rank, idx in groups.items():
        if kept.get(rank):
            mask[idx] = np.isin(step[idx], np.fromiter(kept[rank], np.int64))
    return table.filter(pa.array(mask))


def _clipped(steps: pa.Table, clip: dict[object, tuple[int, int]]) -> pa.Table:
    """Each step's recorded range cut to the time window of its rank (the window's end extended to
    the kept tasks that run past it), so a step the window cuts counts only its part inside."""
    if steps.num_rows == 0:
        return steps
    keys = [r for r in clip if r is not None]
    pos = pc.fill_null(pc.index_in(steps["rank"], value_set=pa.array(keys, pa.int32())), len(keys)).to_numpy(
        zero_copy_only=False
    )
    lo = np.array([clip[r][0] for r in keys] + [-(2**62)], np.int64)[pos]
    hi = np.array([clip[r][1] for r in keys] + [2**62], np.int64)[pos]
    cols = {}
    for name, bound, pick in (("start", lo, np.maximum), ("end", hi, np.minimum)):
        exact = steps[f"{name}_ns"]
        valid = pc.is_valid(exact).to_numpy(zero_copy_only=False)
        ns = np.where(valid, pick(pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), bound), 0)
        cols[f"{name}_ns"] = pa.array(ns, pa.int64(), mask=~valid)
        us = pc.fill_null(steps[f"{name}_us"], np.nan).to_numpy(zero_copy_only=False)
        cols[f"{name}_us"] = pa.array(pick(us, bound / 1000.0), pa.float64(), mask=np.isnan(us))
    for name, col in cols.items():
        steps = steps.set_column(steps.schema.get_field_index(name), name, col)
    return steps


def _empty_window(kernels: pa.Table, steps_table: pa.Table | None, steps, time, span_us: float) -> str:
    """Why a window holds nothing, with what the profile has: the step ids or the time it spans."""
    if steps is not None:
        ids = pc.unique(kernels["step"].drop_null()).to_numpy(zero_copy_only=False)
        if steps_table is not None and steps_table.num_rows:
            ids = np.union1d(ids, steps_table["step"].drop_null().to_numpy(zero_copy_only=False))
        return (
            f"--steps {steps_spec(steps)}: no step of this profile is in that window; it has "
            f"{describe_steps(np.unique(ids))}"
        )
    lo = "" if time[0] is None else _fmt_time(time[0])
    hi = "" if time[1] is None else _fmt_time(time[1])
    whole = _fmt_time(span_us)
    return (
        f"--time {lo}:{hi}: no device task starts in that window; this profile spans "
        f"{whole} from its first device task "
        f"(--time 0s:{whole})"
    )


def steps_spec(steps: tuple[int | None, int | None]) -> str:
    """A steps window as the user writes it: ``3:9``, ``3:``, ``:9``."""
    return f"{'' if steps[0] is None else steps[0]}:{'' if steps[1] is None else steps[1]}"


def describe_steps(ids) -> str:
    """The step ids a profile has (sorted, distinct, at least one), as a window message says them."""
    n = len(ids)
    first, last = int(ids[0]), int(ids[-1])
    if n == 1:
        return f"step {first} only (--steps {first})"
    if last - first + 1 == n:
        return f"steps {first} to {last} (--steps {first}:{last})"
    shown = ", ".join(str(int(i)) for i in ids[:8])
    return f"{n:,} steps: {shown}{', …' if n > 8 else ''} (--steps {first}:{last})"


def _fmt_time(us: float) -> str:
    if us == 0:
        return "0s"
    if us >= 1e6:
        return f"{us / 1e6:.6g}s"
    if us >= 1e3:
        return f"{us / 1e3:.6g}ms"
    return f"{us:.6g}us"
