"""--steps / --time restrict every table, rule and summary to the window."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from npudiag.profiling.analysis.window import apply_window, parse_steps, parse_time
from npudiag.profiling.ingest import ingest
from npudiag.testing.generate import write_torch_profile

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
    lo = pc.min(cut["kernels"]["start_us"]).as_py()
    assert pc.min(cut["api_calls"]["start_us"]).as_py() >= lo
    assert cut["api_calls"].num_rows < tables["api_calls"].num_rows


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
