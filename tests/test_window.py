"""--steps / --time restrict every table, rule and summary to the window."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from npudiag.profiling.analysis.window import apply_window, parse_steps, parse_time
from npudiag.profiling.ingest import ingest
from npudiag.profiling.rules import rules
from npudiag.testing.generate import write_torch_profile

from .conftest import CORPUS
from .helpers import run_cli


def test_parse() -> None:
    assert parse_steps("10:100") == (10, 100)
    assert parse_steps("5") == (5, 5)
    assert parse_steps("3:") == (3, None)
    assert parse_time("1.5s:3.0s") == (1.5e6, 3.0e6)
    assert parse_time("200ms:") == (2e5, None)
    for bad in ("a:b", "9:2"):
        with pytest.raises(ValueError):
            parse_steps(bad)
    with pytest.raises(ValueError):
        parse_time("fast")


def test_steps_window_cuts_every_table(tmp_path: Path) -> None:
    gt = write_torch_profile(tmp_path, kernels=2000, steps=4, copies=0, mallocs_per_step=1)
    tables = ingest([Path(gt.profile_dir)]).tables
    cut = apply_window(tables, steps=(2, 3))
    assert set(cut["kernels"]["step"].to_pylist()) == {2, 3}
    assert cut["steps"]["step"].to_pylist() == [2, 3]
    # host calls from step 2's recorded start (ProfilerStep#2 in the trace) to step 4's
    with open(Path(gt.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json") as fh:
        marks = {e["name"]: float(e["ts"]) for e in json.load(fh) if e.get("name", "").startswith("ProfilerStep#")}
    starts = cut["api_calls"]["start_us"].to_numpy()
    assert starts.min() >= marks["ProfilerStep#2"] - 1 and starts.max() < marks["ProfilerStep#4"]
    assert cut["api_calls"].num_rows < tables["api_calls"].num_rows


ACROSS = {r.rule_id for r in rules().values() if r.across_steps}


def owned_by(t) -> set[tuple]:
    """The (rule, rank, start, end) time ranges the findings own, but those of rules that compare steps."""
    return {(r["rule_id"], r["rank"], r["start_ns"], r["end_ns"]) for r in t.to_pylist() if r["rule_id"] not in ACROSS}


# what each table is cut by: every row of a rank that has steps belongs to exactly one step
_PARTITIONED = ("kernels", "copies", "api_calls", "host_ops", "ranges", "comm_tasks", "comm_ops", "memory_timeline")


def _window_profiles(tmp_path: Path) -> list[Path]:
    gt = write_torch_profile(tmp_path / "gen", kernels=1200, steps=4, copies=40, mallocs_per_step=2)
    out = [Path(gt.profile_dir), Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"]
    if CORPUS.is_dir():
        names = ("msinsight-pytorch-db-rank1/level1", "msinsight-pytorch-text-2025/level1", "mindinsight-prof-device0-2023",
                 "msinsight-st-cann83rc1-level2-4rank", "mstt-advisor-trace-view")  # fmt: skip
        out += [CORPUS / n for n in names]
    return out


def _key(t) -> list[tuple]:
    wanted = ("rank", "start_ns", "start_us", "ts_ns", "name", "op_name", "duration_us", "side", "thread_id")
    cols = [c for c in wanted if c in t.column_names]
    return sorted(tuple(str(v) for v in row.values()) for row in t.select(cols).to_pylist())


def test_a_step_reads_the_same_with_or_without_the_window(tmp_path: Path) -> None:
    """`--steps N:N` gives step N's row, copies, host calls, memory records and findings exactly as
    the unwindowed run counts them in step N: the windows of all steps partition every timed
    table, and each window's step row equals the unwindowed one (generated and corpus profiles;
    sample_torch's step 4 once lost its 480 ms of copies to the window)."""
    from npudiag.profiling.analysis.window import Window
    from npudiag.profiling.derive import cut_and_derive

    for path in _window_profiles(tmp_path):
        tables = ingest([path]).tables
        whole = cut_and_derive(tables, Window()).tables
        ids = sorted(set(whole["step_breakdown"]["step"].drop_null().to_pylist()))
        assert ids, path
        cuts = {n: cut_and_derive(tables, Window(steps=(n, n))).tables for n in ids}
        for name in _PARTITIONED:
            ranks_with_steps = set(whole["step_breakdown"].filter(pc.is_valid(whole["step_breakdown"]["step"]))["rank"].to_pylist())
            t = whole[name].filter(pc.is_in(whole[name]["rank"], pa.array(sorted(ranks_with_steps), pa.int32())))
            pieces = [row for n in ids for row in _key(cuts[n][name])]
            assert sorted(pieces) == _key(t), (path, name)
        for n, cut in cuts.items():
            mine = whole["step_breakdown"].filter(pc.equal(whole["step_breakdown"]["step"], n)).to_pylist()
            theirs = cut["step_breakdown"].to_pylist()
            assert len(mine) == len(theirs), (path, n)
            for a, b in zip(mine, theirs):
                for col, v in a.items():
                    if isinstance(v, float):
                        assert b[col] == pytest.approx(v, rel=1e-9, abs=1e-6), (path, n, col)
                    else:
                        assert b[col] == v, (path, n, col)
        # every time range a finding owns falls in one step's window, with the same rule (but the rules
        # that compare steps with each other, which one step cannot show)
        owned = owned_by(whole["finding_intervals"])
        per_step = set().union(*(owned_by(cut["finding_intervals"]) for cut in cuts.values()))
        assert per_step <= owned, (path, sorted(per_step - owned)[:5])
        # what no one step holds: device idle between one step's last task and the next step's first
        bd = whole["step_breakdown"].to_pylist()
        tasks = sorted((r["rank"], r["start_us"], r["start_us"] + r["step_time_us"] - r["before_first_task_us"] - r["after_last_task_us"])
                       for r in bd if r["step"] is not None)  # fmt: skip
        for rule, rank, lo, hi in owned - per_step:
            assert rule == "device_idle", (path, rule)
            after = [i for i, (r, _, last) in enumerate(tasks) if r == rank and last <= lo / 1e3 + 1]
            assert after and after[-1] + 1 < len(tasks) and tasks[after[-1] + 1][1] >= hi / 1e3 - 1, (path, lo, hi)


def test_cli_window_and_errors(tmp_path: Path) -> None:
    gt = write_torch_profile(tmp_path, kernels=800, steps=4, copies=0)
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--start-step", "4", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert [x["step"] for x in s["steps"]] == [4] and s["window"]["steps"] == [4, None]
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--steps", "x:y")
    assert r.returncode == 2 and "expected FIRST:LAST" in r.stderr and "Traceback" not in r.stderr


def test_an_empty_window_is_a_usage_error_naming_what_the_profile_has(tmp_path: Path) -> None:
    """`--steps 50:60` on a 4-step profile printed an empty report and exit 0; now exit 2 in every
    command, naming the steps (or the time) the profile has, with nothing written."""
    gt = write_torch_profile(tmp_path / "p", kernels=800, steps=4, copies=0)
    for window, says in ((("--steps", "50:60"), "it has steps 1 to 4 (--steps 1:4)"), (("--start-step", "9"), "steps 1 to 4"),
                         (("--time", "10s:"), "spans")):  # fmt: skip
        r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", *window)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (window, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists(), r.stderr
    # the time the message gives is the profile's own: kernels from the first start to the last end
    with open(Path(gt.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        rows = [(float(r["Start Time(us)"]), float(r["Duration(us)"])) for r in csv.DictReader(fh)]
    start, end = min(s for s, _ in rows), max(s + d for s, d in rows)
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--time", "10s:")
    assert f"spans {(end - start) / 1e3:.6g}ms" in r.stderr, r.stderr
    # several ranks: one line for all, not one failure per rank
    for rank in range(3):
        write_torch_profile(tmp_path / "ranks" / f"r{rank}", kernels=400, steps=4, copies=0, seed=rank, rank=rank)
    r = run_cli("analyze", tmp_path / "ranks", "--out", tmp_path / "o", "--steps", "50:60")
    assert r.returncode == 2 and "(on every rank)" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "o").exists()
    g = run_cli("gate", gt.profile_dir, gt.profile_dir, "--steps", "50:60", "-q")
    assert g.returncode == 2 and "it has steps 1 to 4" in g.stderr, g.stderr
    # a profile without step ids: the gate once passed it whole, as if the window had been cut
    from npudiag.testing.generate import write_msprof_profile

    ms = write_msprof_profile(tmp_path / "ms", kernels=400)
    g = run_cli("gate", ms.profile_dir, ms.profile_dir, "--steps", "2:", "-q")
    assert g.returncode == 2 and "carry no step ids" in g.stderr, g.stderr


def test_time_is_counted_and_checked_against_the_whole_span(tmp_path: Path) -> None:
    """`--time 200ms:600ms` on sample_torch (only copies start there) once failed as outside a profile
    "spanning 118.73ms" while the header said 606.64 ms: the span counts every device task (the
    trace's Ascend Hardware events: kernels and copies), recounted here from trace_view.json."""
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    (trace,) = sample.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text())
    hw = {e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"}
    tasks = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events if e.get("ph") == "X" and e["pid"] in hw]
    span_ms = (max(e for _, e in tasks) - min(s for s, _ in tasks)) / 1e3
    r = run_cli("analyze", sample, "--time", "200ms:600ms", "--json", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    copies = json.loads(r.stdout)["copies"]
    first = min(s for s, _ in tasks)
    in_window = [s for s, _ in tasks if first + 200e3 <= s <= first + 600e3]
    assert copies["count"] == len(in_window) > 0
    r = run_cli("analyze", sample, "--time", "700ms:", "--out", tmp_path / "never")
    assert r.returncode == 2 and f"spans {span_ms:.6g}ms from its first device task" in r.stderr, r.stderr
