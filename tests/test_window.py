"""--steps / --time restrict every table, rule and summary to the window."""

from __future__ import annotations

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
