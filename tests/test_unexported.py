"""Collected but never exported: named with the exact command that exports it, and `analyze
--export` runs it (the msprof and torch_npu stand-ins write the real export formats)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from .helpers import msprof_standin_path, run_cli

STANDINS = Path(__file__).resolve().parent / "standins"


def _raw_prof(tmp_path: Path, env: dict[str, str]) -> Path:
    """A PROF_* folder as msprof leaves it before the export: host/data and device_0/data only."""
    r = subprocess.run(["msprof", f"--output={tmp_path / 'coll'}", sys.executable, "-c", "pass"], capture_output=True, text=True,
                       env={**os.environ, **env, "MSPROF_STANDIN_NO_EXPORT": "1"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    (prof,) = (tmp_path / "coll").glob("PROF_*")
    assert not (prof / "mindstudio_profiler_output").exists() and any((prof / "host" / "data").iterdir())
    return prof


def _raw_torch(root: Path) -> Path:
    """An *_ascend_pt folder whose offline parse never ran: FRAMEWORK/ and PROF_*/ raw data."""
    pt = root / "worker0_2647914_20251127192734000_ascend_pt"
    (pt / "FRAMEWORK").mkdir(parents=True)
    (pt / "FRAMEWORK" / "torch.op_range").write_bytes(b"\x01\x00" * 64)
    dev = pt / "PROF_000001_20251127192734000_ABCDEFGHIJKLMNOP" / "device_0" / "data"
    dev.mkdir(parents=True)
    (dev / "ts_track.data.0.slice_0").write_bytes(b"\x00" * 64)
    (pt / "profiler_info.json").write_text('{"config": {"common_config": {"activities": ["CPU", "NPU"]}}}')
    return pt


def test_an_unexported_prof_folder_names_the_export_and_analyze_export_runs_it(tmp_path: Path) -> None:
    """It printed a full empty report, then "nothing to analyze", exit 2, no word of the export."""
    env = {**msprof_standin_path(tmp_path / "bin"), "MSPROF_ARGS_LOG": str(tmp_path / "args.txt")}
    prof = _raw_prof(tmp_path, env)
    r = run_cli("analyze", prof, "--out", tmp_path / "o", env=env)
    assert r.returncode == 2 and r.stdout == "", r.stdout  # no empty report
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "collected but never exported" in lines[0], r.stderr
    assert shlex.join(["msprof", "--export=on", f"--output={prof}"]) in lines[0] and "--export" in lines[0]
    assert not (tmp_path / "o").exists()
    r = run_cli("analyze", prof, "--out", tmp_path / "o", "--export", env=env)
    assert r.returncode == 0, r.stderr
    calls = [c.split("\x1f") for c in Path(env["MSPROF_ARGS_LOG"]).read_text().splitlines()]
    assert calls[-1] == ["--export=on", f"--output={prof}"]
    assert "exported before analysis with" in r.stderr and (tmp_path / "o" / "kernels.parquet").is_file()
    # without msprof: one line saying what is missing, nothing run
    bare = run_cli("analyze", _raw_prof(tmp_path / "again", env), "--export", "--out", tmp_path / "o2",
                   env={"PATH": "/nonexistent", "ASCEND_TOOLKIT_HOME": str(tmp_path / "none"), "HOME": str(tmp_path)})  # fmt: skip
    assert bare.returncode == 2 and "--export needs msprof" in bare.stderr and len(bare.stderr.strip().splitlines()) == 1


def test_an_unparsed_torch_folder_names_torch_npus_analyse_and_analyze_export_runs_it(tmp_path: Path) -> None:
    pt = _raw_torch(tmp_path / "prof")
    r = run_cli("analyze", tmp_path / "prof", "--out", tmp_path / "o")
    assert r.returncode == 2 and r.stdout == ""
    assert "torch_npu's offline parse never ran" in r.stderr and "analyse(profiler_path=" in r.stderr, r.stderr
    assert repr(str(pt.parent)) in r.stderr  # the folder holding the *_ascend_pt folders, as analyse wants
    log = tmp_path / "analyse.txt"
    env = {"PYTHONPATH": os.pathsep.join([str(STANDINS), os.environ.get("PYTHONPATH", "")]), "TORCH_NPU_ANALYSE_LOG": str(log)}
    r = run_cli("analyze", tmp_path / "prof", "--out", tmp_path / "o", "--export", env=env)
    assert r.returncode == 0, r.stderr
    assert log.read_text().splitlines() == [str(pt.parent)]
    assert (pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file() and (tmp_path / "o" / "kernels.parquet").is_file()


def test_renamed_traces_are_read_by_content_and_what_is_not_read_is_listed(tmp_path: Path) -> None:
    """A folder of msprof outputs renamed by a user: trace.json was skipped silently, in neither the
    manifest's inputs nor its unread files."""
    import json
    import shutil

    src = next((Path(__file__).resolve().parents[1] / "fixtures" / "sample_msprof").glob("PROF_*")) / "mindstudio_profiler_output"
    ren = tmp_path / "ren"
    ren.mkdir()
    shutil.copy(next(src.glob("msprof_*.json")), ren / "trace.json")
    shutil.copy(next(src.glob("op_summary_*.csv")), ren / "op_summary.csv")
    (ren / "notes.json").write_text('{"run": "baseline"}')
    r = run_cli("analyze", ren, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    used = {Path(i["path"]).name: i for i in manifest["inputs"]}
    assert used["trace.json"]["kind"] == "trace" and used["trace.json"]["used_for"]
    (unit,) = manifest["units"]
    why = "neither its name nor its content matches a format npudiag reads"
    assert unit["not_read"] == [{"path": str(ren / "notes.json"), "reason": why}]
    assert sum("1 file(s) not read" in w and "notes.json" in w for w in manifest["warnings"]) == 1
    # the copies the trace holds, counted from the raw file: msprof's MEMCPY device tasks
    events = json.loads((ren / "trace.json").read_text())
    device = [e for e in events if e.get("ph") == "X" and "MEMCPY" in str(e.get("name", "")).upper() and e.get("args", {}).get("Task Type")]
    assert json.loads(r.stdout)["copies"]["count"] == len(device) > 0


def test_repeated_runs_in_one_collect_folder_are_runs_not_ranks(tmp_path: Path) -> None:
    """Seven `npudiag profile` runs into one --collect-dir: analyze said "ranks 7" (all device 0)."""
    import csv
    import json
    import time

    env = {**msprof_standin_path(tmp_path / "bin")}
    for _ in range(3):
        r = subprocess.run(["msprof", f"--output={tmp_path / 'coll'}", sys.executable, "-c", "pass"], capture_output=True, text=True,
                           env={**os.environ, **env})  # fmt: skip
        assert r.returncode == 0, r.stderr
        time.sleep(0.01)
    profs = sorted((tmp_path / "coll").glob("PROF_*"))  # the name carries the collection time: sorted is oldest first
    assert len(profs) == 3 and all((p / "device_0").is_dir() for p in profs)
    r = run_cli("analyze", tmp_path / "coll", "--out", tmp_path / "o", "--json", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["profile"]["ranks"] == 1
    assert any("3 runs of the same process" in w and f"analysing the latest, {profs[-1].name}" in w for w in data["warnings"])
    with open(next((profs[-1] / "mindstudio_profiler_output").glob("op_summary_*.csv")), newline="") as fh:
        assert data["profile"]["kernels"] == sum(1 for _ in csv.DictReader(fh))
    every = json.loads(run_cli("analyze", tmp_path / "coll", "--out", tmp_path / "o", "--json", "--runs", "all", env=env).stdout)
    assert every["profile"]["ranks"] == 3 and any("read as 3 ranks (--runs all)" in w for w in every["warnings"])
    g = run_cli("gate", tmp_path / "coll", tmp_path / "coll", "--json", env=env)
    assert g.returncode == 0 and {m["base_n"] for m in json.loads(g.stdout)["metrics"]} == {3}, g.stdout  # one sample per run


def test_processes_that_each_see_device_0_side_by_side_are_ranks_not_runs(tmp_path: Path) -> None:
    """Eight processes with ASCEND_RT_VISIBLE_DEVICES each see their card as device 0: their PROF_*
    folders, collected at the same time (msprof's start_info / end_info say when), are ranks."""
    import json
    import shutil

    env = {**msprof_standin_path(tmp_path / "bin")}
    src = _raw_prof(tmp_path / "one", env)
    from npudiag.testing.generate import write_msprof_profile

    t0 = 1_765_000_000_000_000
    # each process's own tasks: the same program, started 0.5 s apart (no two processes share task times)
    gts = {"A": write_msprof_profile(tmp_path / "genA", kernels=300, copies=0, t0_us=t0 + 1_000.5),
           "B": write_msprof_profile(tmp_path / "genB", kernels=300, copies=0, t0_us=t0 + 501_000.25)}  # fmt: skip

    def place(name: str, begin_us: int, end_us: int) -> Path:
        prof = tmp_path / "job" / name
        shutil.copytree(src, prof)
        gt = gts[name[-16]]
        shutil.copytree(Path(gt.profile_dir) / "mindstudio_profiler_output", prof / "mindstudio_profiler_output")
        (prof / "device_0" / "start_info.0").write_text(json.dumps({"collectionDateBegin": "", "collectionTimeBegin": str(begin_us)}))
        (prof / "device_0" / "end_info.0").write_text(json.dumps({"collectionDateEnd": "", "collectionTimeEnd": str(end_us)}))
        return prof

    place("PROF_000001_20261206100000000_AAAAAAAAAAAAAAAA", t0, t0 + 60_000_000)
    place("PROF_000001_20261206100000500_BBBBBBBBBBBBBBBB", t0 + 500_000, t0 + 61_000_000)
    r = run_cli("analyze", tmp_path / "job", "--out", tmp_path / "o", "--json")
    data = json.loads(r.stdout)
    assert data["profile"]["ranks"] == 2 and not any("runs of the same process" in w for w in data["warnings"])
    # the same two collected one after the other are runs
    shutil.rmtree(tmp_path / "job")
    place("PROF_000001_20261206100000000_AAAAAAAAAAAAAAAA", t0, t0 + 60_000_000)
    place("PROF_000001_20261206100200000_BBBBBBBBBBBBBBBB", t0 + 120_000_000, t0 + 180_000_000)
    data = json.loads(run_cli("analyze", tmp_path / "job", "--out", tmp_path / "o2", "--json").stdout)
    assert data["profile"]["ranks"] == 1 and any("2 runs of the same process" in w for w in data["warnings"])
