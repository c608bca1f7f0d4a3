"""Hostile input: crafted files and folders that once wrote outside the target, used gigabytes,
went quadratic or crashed. For each: nothing outside the target changes (the parent tree is
listed before and after), the exit is 0 or 2 with one line (never 3), a kilobyte input takes at
most 300 MB and 5 s, and the numbers are right or warned about."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .hostile import MAX_RSS_MB, changed_outside, one_line_or_clean, run, snapshot

# crafted inputs, each in a child process measured for memory
pytestmark = pytest.mark.slow

KERNEL_HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"


def _small(o, limit_mb: float = MAX_RSS_MB) -> None:
    """One line or a clean run, in bounded memory (a hang is caught by run's guard, not timed here)."""
    one_line_or_clean(o)
    assert o.rss_mb <= limit_mb, f"{o.rss_mb:.0f} MB"


def _kernel_csv(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KERNEL_HEADER + "\n" + "".join(r + "\n" for r in rows))
    return path


# -- writes and deletes outside the target ------------------------------------------------------


def test_sqlite_uri_in_a_folder_name_creates_nothing(tmp_path: Path) -> None:
    evil = tmp_path / "in" / "%2E%2E%2Fpwned_sqlite?mode=rwc&z="
    gt = write_msprof_profile(tmp_path / "gen", kernels=20, copies=1, db=True, text=False)
    evil.mkdir(parents=True)
    (evil / "msprof_1.db").write_bytes(next(Path(gt.profile_dir).glob("msprof_*.db")).read_bytes())
    before = snapshot(tmp_path)
    o = run("analyze", evil, "--out", tmp_path / "out", "--json", cwd=tmp_path)
    _small(o)
    assert o.code == 0 and json.loads(o.stdout)["profile"]["kernels"] == 20
    assert changed_outside(before, snapshot(tmp_path), ["out"]) == []


def test_out_star_leaves_other_tools_hidden_folders(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    (tmp_path / ".myproject.tmp-notes").mkdir()
    (tmp_path / ".myproject.tmp-notes" / "todo.txt").write_text("keep me")
    (tmp_path / ".*.tmp-x").mkdir()
    before = snapshot(tmp_path)
    o = run("analyze", sample, "--out", "*", "--quiet", cwd=tmp_path)
    _small(o)
    assert changed_outside(before, snapshot(tmp_path), ["*"]) == []
    # a stale staging folder of a killed npudiag run (its marker names a process that is gone) goes
    stale = tmp_path / ".*.tmp-killed"
    stale.mkdir()
    (stale / ".npudiag-staging").write_text(json.dumps({"pid": 2**22 + 12345, "started": 0}))
    assert run("analyze", sample, "--out", "*", "--quiet", cwd=tmp_path).code == 0
    assert not stale.exists() and (tmp_path / ".myproject.tmp-notes" / "todo.txt").read_text() == "keep me"


def test_a_folder_with_another_tools_manifest_is_not_npudiags(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "manifest.json").write_text(json.dumps({"name": "My PWA", "start_url": "/"}))
    (site / "index.html").write_text("<html></html>")
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    before = snapshot(tmp_path)
    o = run("analyze", sample, "--out", site, "--quiet")
    _small(o)
    assert o.code == 2 and "was not written by npudiag" in o.stderr and len(o.stderr.strip().splitlines()) == 1
    assert changed_outside(before, snapshot(tmp_path), []) == []


def test_two_runs_into_one_out_at_once(tmp_path: Path) -> None:
    gt = write_torch_profile(tmp_path / "in", kernels=30_000, copies=4, seed=3)
    out = tmp_path / "out"
    results = []

    def go() -> None:
        results.append(run("analyze", gt.profile_dir, "--out", out, "--quiet", timeout=120))

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in results:
        one_line_or_clean(o)
        if o.code == 2:
            assert "another npudiag run is writing this folder" in o.stderr
    assert any(o.code == 0 for o in results)
    manifest = json.loads((out / "manifest.json").read_text())
    assert pq.read_metadata(out / "kernels.parquet").num_rows == manifest["row_counts"]["kernels"] == 30_000
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging or lock left


def test_links_out_of_the_input_tree_are_not_followed(tmp_path: Path) -> None:
    secret = _kernel_csv(tmp_path / "elsewhere" / "secret.csv", ["1,Add,Add,AI_CORE,1000.000\t,10.000,0,1"])
    prof = tmp_path / "in" / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    _kernel_csv(prof / "kernel_details.csv", ["1,Mul,Mul,AI_CORE,1000.000\t,5.000,0,1"])
    (prof / "op_statistic.csv").symlink_to(secret)
    o = run("analyze", tmp_path / "in", "--out", tmp_path / "o", "--json")
    _small(o)
    data = json.loads(o.stdout)
    assert any("outside" in w and "not followed" in w for w in data["warnings"])
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert not [f for f in manifest["inputs"] if "op_statistic" in f["path"]]
    o = run("analyze", tmp_path / "in", "--out", tmp_path / "o2", "--json", "--follow-symlinks")
    manifest = json.loads((tmp_path / "o2" / "manifest.json").read_text())
    assert [f for f in manifest["inputs"] if "op_statistic" in f["path"]]


def test_dump_names_are_never_paths(tmp_path: Path) -> None:
    from npudiag.testing.dump_writer import Tensor, write_dump_file

    d = tmp_path / "work" / "dump" / "20250101000000" / "0" / "m" / "1" / "0"
    write_dump_file(d / "1", "Add", [Tensor(np.ones((2, 2), np.float32))], [Tensor(np.ones((2, 2), np.float32))])
    (d / "mapping.csv").write_text("1,../../../../../../pwned.Add.op.1.1.1764246877073569\n")
    (d / "2").write_bytes((d / "1").read_bytes())
    with open(d / "mapping.csv", "a") as fh:
        fh.write(f"2,{tmp_path}/abs_pwned.Add.op.1.1.1764246877073570\n")
    before = snapshot(tmp_path)
    o = run("dump", "parse", tmp_path / "work" / "dump", "--out", tmp_path / "work" / "out", "--npy", tmp_path / "work" / "npy")
    _small(o)
    assert changed_outside(before, snapshot(tmp_path), ["work/out", "work/npy"]) == []
    assert len(list((tmp_path / "work" / "npy").glob("*.npy"))) == 4


def test_logs_export_moves_only_what_the_tool_made_inside_its_folder(tmp_path: Path) -> None:
    victim = tmp_path / "precious" / "2025-01-01-00-00-00"
    victim.mkdir(parents=True)
    (victim / "data.txt").write_text("mine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "msnpureport"
    tool.write_text(f"#!/bin/sh\necho 'msnpureport 1.0'\necho 'get device info failed: {victim}'\nexit 0\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    before = snapshot(tmp_path)
    r = subprocess.run([sys.executable, "-m", "npudiag", "logs", "export", "--out", str(tmp_path / "exp" / "e1")], env=env,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 2 and "no YYYY-MM-DD-hh-mm-ss export folder" in r.stderr
    assert (victim / "data.txt").read_text() == "mine"
    assert changed_outside(before, snapshot(tmp_path), ["exp"]) == []


def test_host_level_output_is_quoted_for_eval(tmp_path: Path) -> None:
    o = run("logs", "level", "--host", "--module", "$(touch pwned):debug", cwd=tmp_path)
    one_line_or_clean(o)
    assert o.code == 0
    subprocess.run(["sh", "-c", o.stdout], cwd=tmp_path, check=True)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "PWNED)").exists()
    assert all(line.startswith("export ") for line in o.stdout.splitlines())


# -- memory and time ----------------------------------------------------------------------------


def _db(path: Path, tasks: int, infos: int, long_text: int = 0) -> Path:
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER,"
        " globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);"
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, taskType INTEGER,"
        " opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER,"
        " outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER);"
    )
    con.execute("INSERT INTO STRING_IDS VALUES (0, 'AI_CORE'), (1, ?)", ("x" * long_text or "MatMul",))
    t0 = 1_764_246_877_073_569_000
    con.executemany("INSERT INTO TASK VALUES (?,?,0,?,7,1,0,0,2,?,0)", [(t0 + i * 1000, t0 + i * 1000 + 500, i, i) for i in range(tasks)])
    con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (1, 7, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)", [()] * infos)
    con.commit()
    con.close()
    return path


def test_db_join_product_stays_small(tmp_path: Path) -> None:
    db = _db(tmp_path / "msprof_1.db", 1000, 1000)
    assert db.stat().st_size < 200_000
    o = run("analyze", db, "--out", tmp_path / "o", "--json")
    _small(o)
    assert json.loads(o.stdout)["profile"]["kernels"] == 1000  # one kernel per TASK row, not per join pair


def test_db_huge_string_used_by_many_tasks(tmp_path: Path) -> None:
    db = _db(tmp_path / "msprof_1.db", 40, 1, long_text=5_000_000)
    o = run("analyze", db, "--out", tmp_path / "o", "--json")
    _small(o)
    assert any("STRING_IDS value(s) longer than" in w for w in json.loads(o.stdout)["warnings"])


def test_kernel_csv_with_forty_thousand_metric_columns(tmp_path: Path) -> None:
    cols = [f"m{i}" for i in range(40_000)]
    path = tmp_path / "kernel_details.csv"
    row = "1,Add,Add,AI_CORE,1000.000\t,10.000,0,1," + ",".join("1" for _ in cols)
    path.write_text(KERNEL_HEADER + "," + ",".join(cols) + "\n" + row + "\n")
    o = run("analyze", path, "--out", tmp_path / "o", "--json")
    _small(o)


@pytest.mark.parametrize("name", ["profiler_info_0.json", "profiler_metadata.json"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_metadata_that_is_a_fifo_or_dev_zero(tmp_path: Path, name: str, kind: str) -> None:
    folder = tmp_path / "r_ascend_pt"
    _kernel_csv(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", ["1,Add,Add,AI_CORE,1000.000\t,10.000,0,1"])
    if kind == "fifo":
        os.mkfifo(folder / name)
    else:
        (folder / name).symlink_to("/dev/zero")
    o = run("analyze", folder, "--out", tmp_path / "o", "--json", "--follow-symlinks")
    _small(o)
    assert o.code == 0


# -- crashes on input -------------------------------------------------------------------------------


def _trace(path: Path, events: list[dict]) -> Path:
    meta = [
        {"name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
        {"name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta + events))
    return path


def _task(name: str, ts: str, dur, **args) -> dict:
    return {"name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur, "ph": "X", "args": {"Task Type": "AI_CORE", **args}}


@pytest.mark.parametrize(
    "ts, dur",
    [("0.000", 5.0), ("nan", 5.0), ("inf", 5.0), ("-inf", 5.0), ("1e-320", 5.0), ("1000.000", float("nan")), ("1000.000", -5.0),
     ("1000.000", float("inf")), ("99999999999999999999999999", 5.0)],
)  # fmt: skip
def test_odd_times_never_crash(tmp_path: Path, ts: str, dur: float) -> None:
    events = [_task("MatMul", "1764246877073569.640", 10.0), _task("Odd [/] [bold]x[/bold]", ts, dur),
              _task("Add", "1764246877073600.000", 3.0)]  # fmt: skip
    path = _trace(tmp_path / "trace_view.json", events)
    for extra in ([], ["--html", tmp_path / "r.html", "--chrome-trace", tmp_path / "t.json"]):
        o = run("analyze", path, "--out", tmp_path / "o", *extra)
        _small(o)
        assert o.code == 0


def test_memcpy_event_whose_args_is_a_string(tmp_path: Path) -> None:
    path = _trace(tmp_path / "trace_view.json", [{"name": "MEMCPY_ASYNC", "pid": 1, "tid": 2, "ts": "10.000", "dur": 1.0, "ph": "X",
                                                   "args": "host to device"}, _task("Add", "20.000", 1.0)])  # fmt: skip
    o = run("analyze", path, "--out", tmp_path / "o", "--json")
    _small(o)
    assert o.code == 0


def test_communication_json_of_the_wrong_shape(tmp_path: Path) -> None:
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    _kernel_csv(out / "kernel_details.csv", ["1,Add,Add,AI_CORE,1000.000\t,10.000,0,1"])
    (out / "communication.json").write_text(json.dumps({"step1": {"collective": [1, 2]}}))
    o = run("analyze", tmp_path / "r_ascend_pt", "--out", tmp_path / "o")
    _small(o)
    assert o.code == 2 and "communication.json" in o.stderr and "expected an object" in o.stderr


@pytest.mark.parametrize("where", ["acl", "rule_toml", "gate_toml", "manifest"])
def test_deep_nesting_is_one_line(tmp_path: Path, where: str) -> None:
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    deep_json = '{"dump": ' + "[" * 50_000 + "]" * 50_000 + "}"
    deep_toml = "a = " + "[" * 50_000 + "]" * 50_000 + "\n"
    if where == "acl":
        (tmp_path / "acl.json").write_text(deep_json)
        outs = [run("dump", "check", tmp_path / "acl.json"), run("dump", "--overflow", "--acl-json", tmp_path / "acl.json")]
    elif where == "rule_toml":
        (tmp_path / "r.toml").write_text(deep_toml)
        outs = [run("analyze", sample, "--rule-file", tmp_path / "r.toml", "--out", tmp_path / "o")]
    elif where == "gate_toml":
        (tmp_path / "g.toml").write_text(deep_toml)
        outs = [run("gate", sample, sample, "--config", tmp_path / "g.toml")]
    else:
        assert run("analyze", sample, "--out", tmp_path / "o", "--quiet").code == 0
        (tmp_path / "o" / "manifest.json").write_text(deep_json)
        outs = [run("report", tmp_path / "o")]
    for o in outs:
        _small(o)
        assert o.code == 2 and len(o.stderr.strip().splitlines()) <= 3  # Typer's usage box counts as one message


def test_out_folder_changed_after_analyze(tmp_path: Path) -> None:
    import pyarrow as pa

    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    out = tmp_path / "o"
    assert run("analyze", sample, "--out", out, "--quiet").code == 0
    k = pq.read_table(out / "kernels.parquet")
    pq.write_table(k.set_column(k.schema.get_field_index("duration_us"), "duration_us", k["duration_us"].cast(pa.string())),
                   out / "kernels.parquet")  # fmt: skip
    for cmd in (["report", out], ["compare", out, out], ["gate", out, out]):
        o = run(*cmd)
        _small(o)
        assert o.code == 2 and "duration_us" in o.stderr
    pq.write_table(k.drop_columns(["start_us"]), out / "kernels.parquet")
    o = run("report", out)
    assert o.code == 2 and "start_us" in o.stderr
    (out / "manifest.json").write_text("[1, 2]")
    o = run("report", out)
    assert o.code == 2 and "manifest" in o.stderr


@pytest.mark.parametrize("args", [["--steps", "99999999999999999999:"], ["--rule-opt", "unoverlapped_copy.worst=nan"],
                                  ["--rule-opt", "device_idle.min_gap_us=inf"], ["--time", "9e999s:"]])  # fmt: skip
def test_odd_options(tmp_path: Path, args: list[str]) -> None:
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    o = run("analyze", sample, "--out", tmp_path / "o", *args)
    _small(o)
    assert o.code == 2


# -- silently wrong numbers ----------------------------------------------------------------------------


def test_negative_nan_and_missing_times_are_warned_and_left_out(tmp_path: Path) -> None:
    rows = [
        "1,Add,Add,AI_CORE,1000.000\t,10.000,0,1",
        "1,Neg,Neg,AI_CORE,1100.000\t,-5.000,0,1",
        "1,NaN,NaN,AI_CORE,1200.000\t,nan,0,1",
        "1,Inf,Inf,AI_CORE,1300.000\t,inf,0,1",
        "1,NoStart,NoStart,AI_CORE,N/A,7.000,0,1",
        "1,Exp,Exp,AI_CORE,1.000e3,2.000,0,1",
        "1,Mul,Mul,AI_CORE,1500.000\t,20.000,0,1",
    ]
    path = _kernel_csv(tmp_path / "kernel_details.csv", rows)
    o = run("analyze", path, "--out", tmp_path / "o", "--json")
    _small(o)
    data = json.loads(o.stdout)
    assert data["profile"]["kernels"] == 3  # Add, Exp (1000 us), Mul
    assert data["profile"]["kernel_time_us"] == pytest.approx(32.0)
    assert any("4 row(s) with a missing, non-finite or negative start or duration" in w for w in data["warnings"])
    k = pq.read_table(tmp_path / "o" / "kernels.parquet").to_pylist()
    exp = next(r for r in k if r["op_name"] == "Exp")
    assert exp["start_ns"] is None or exp["start_ns"] == 1_000_000  # 1.000e3 us is 1000 us, never 1 us
    assert sum(r["kernels"] for r in data["per_rank"]) == data["profile"]["kernels"]


def test_negative_fraction_start_is_exact(tmp_path: Path) -> None:
    path = _kernel_csv(tmp_path / "kernel_details.csv", ["1,A,A,AI_CORE,-1.500\t,1.000,0,1", "1,B,B,AI_CORE,-0.250\t,1.000,0,1"])
    o = run("analyze", path, "--out", tmp_path / "o", "--quiet")
    _small(o)
    k = pq.read_table(tmp_path / "o" / "kernels.parquet").to_pylist()
    assert [r["start_ns"] for r in k] == [-1500, -250]


def test_step_trace_negative_nan_and_duplicate_rows(tmp_path: Path) -> None:
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    _kernel_csv(out / "kernel_details.csv", ["1,Add,Add,AI_CORE,1000.000\t,10.000,0,1", "2,Add,Add,AI_CORE,2000.000\t,10.000,0,1"])
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble\n"
        "1,10,0,0,0,0,-5,0\n2,10,0,0,0,0,nan,0\n2,10,0,0,0,0,30,0\n"
    )
    o = run("analyze", tmp_path / "r_ascend_pt", "--out", tmp_path / "o", "--json")
    _small(o)
    data = json.loads(o.stdout)
    assert any("step_time_us value(s) negative or not finite" in w for w in data["warnings"])
    assert any("appear(s) more than once" in w for w in data["warnings"])
    for r in data["step_breakdown"]:
        assert r["step_time_us"] >= 10.0 - 1e-9


def test_zip_of_logs_is_read(tmp_path: Path) -> None:
    z = tmp_path / "logs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        line = "[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.000 [stream.cc:1]1 Sync: rtStreamSynchronize failed, ret=507014\n"
        zf.writestr("plog/plog-1_20250101000000000.log", line)
    o = run("logs", "parse", z, "--out", tmp_path / "o", "--json")
    _small(o)
    data = json.loads(o.stdout)
    assert o.code == 0 and data["records"] == 1 and data["by_level"].get("ERROR") == 1 and data["files"] == 1


def test_trace_with_traceevents_inside_otherdata(tmp_path: Path) -> None:
    meta = [{"name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"}, _task("Add", "10.000", 1.0)]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps({"otherData": {"traceEvents": "not this"}, "traceEvents": meta}))
    o = run("analyze", path, "--out", tmp_path / "o", "--json")
    _small(o)
    assert o.code == 0 and json.loads(o.stdout)["profile"]["kernels"] == 1


def test_many_member_archive_is_read_in_one_pass(tmp_path: Path) -> None:
    a = tmp_path / "logs.tar.gz"
    with tarfile.open(a, "w:gz") as tar:
        for i in range(2000):
            data = f"[ERROR] GE({i},p):2025-01-01-00:00:00.000.000 [g.cc:1]1 failed {i}\n".encode()
            info = tarfile.TarInfo(f"plog/plog-{i}_20250101000000000.log")
            info.size = len(data)
            import io

            tar.addfile(info, io.BytesIO(data))
    assert a.stat().st_size < 100_000
    o = run("logs", "parse", a, "--out", tmp_path / "o", "--json")
    one_line_or_clean(o)
    assert json.loads(o.stdout)["records"] == 2000  # every member read, in one pass (tests/test_bounds counts the passes)


# -- every regular expression is linear ---------------------------------------------------------------

ADVERSARIAL = [
    "failed 123456 ret" + " " * 1_000_000 + "x", "[ERROR] A(1," * 80_000, " " * 1_000_000, "a" * 1_000_000, "0" * 1_000_000,
    "[" * 1_000_000, "E" + "9" * 1_000_000, "[ERROR] GE(1,p):" + "2" * 1_000_000, "(" * 1_000_000, "ErrCode=" * 120_000,
    "\\n" * 400_000, "[rank1]: " * 100_000, "a:" * 400_000, "a " * 500_000, "1." * 500_000, "x=" * 400_000, '"' * 1_000_000,
    "\t" * 1_000_000, "retCode=0x" * 100_000, "device(" * 140_000, "|" * 1_000_000, "-" * 1_000_000,
]  # fmt: skip


def _patterns():
    import importlib
    import pkgutil
    import re

    import npudiag

    for m in pkgutil.walk_packages(npudiag.__path__, "npudiag."):
        if m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)
        for name, value in vars(mod).items():
            if isinstance(value, re.Pattern):
                yield f"{m.name}.{name}", value


HANG_GUARD_REGEX_S = 30.0


def test_every_regex_is_linear_on_adversarial_lines() -> None:
    slow = []
    for name, pattern in _patterns():
        for text in ADVERSARIAL:
            if isinstance(pattern.pattern, bytes):  # trace_fast's cut between events works on bytes
                text = text.encode()
            t0 = time.perf_counter()
            for _ in pattern.finditer(text):
                pass
            pattern.match(text)
            dt = time.perf_counter() - t0
            # a hang guard: a linear pattern scans a megabyte in milliseconds, a backtracking one not in hours
            if dt > HANG_GUARD_REGEX_S:
                slow.append((name, text[:16], round(dt, 2)))
    assert slow == []


# -- other outputs --------------------------------------------------------------------------------------


def test_gate_markdown_and_junit_escape_names(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from npudiag.report.gate_report import gate_junit, gate_markdown

    evil = "op` | [link](http://x) | <img src=x>\x1b[31m\x00"
    metric = {"metric": f"op:{evil}", "status": "regression", "failed": True, "base_median_us": 1.0, "cur_median_us": 2.0,
              "ratio": 2.0, "max_regression": 0.05, "base_n": 9, "cur_n": 9, "p_value": 0.001, "method": "mann-whitney",
              "reason": evil}  # fmt: skip
    result = {"passed": False, "regressions": [metric["metric"]], "metrics": [metric], "warnings": [evil],
              "method": {"alpha": 0.002}}  # fmt: skip
    md = gate_markdown(result, evil, "cur")
    row = next(line for line in md.splitlines() if line.startswith("| op"))
    assert row.count(" | ") + 2 == 9 - 1 + 2 - 1  # 8 cells: no pipe of the name opens a new one
    assert "<img" not in md and "](http" not in md and "\x1b" not in md
    ET.fromstring(gate_junit(result, evil, "cur").split("\n", 1)[1])  # well-formed XML


def test_dump_compare_with_unusable_goldens(tmp_path: Path) -> None:
    from npudiag.testing.dump_writer import Tensor, write_dump_file

    d = tmp_path / "mine" / "20250101000000" / "0" / "m" / "1" / "0"
    for i in range(4):
        write_dump_file(d / f"Add.op_{i}.1.1.{1764246877073569 + i}", f"op_{i}", [Tensor(np.ones(4, np.float32))],
                        [Tensor(np.ones(4, np.float32))])  # fmt: skip
    g = tmp_path / "golden"
    g.mkdir()
    np.save(g / "op_0.output.0.npy", np.array([object(), 1], dtype=object), allow_pickle=True)
    np.save(g / "op_1.output.0.npy", np.array(["a", "b"]))
    np.save(g / "op_2.output.0.npy", np.ones(4, np.float32))
    (g / "op_2.output.0.npy").write_bytes((g / "op_2.output.0.npy").read_bytes()[:-8])  # truncated
    (g / "op_3.output.0.npy").write_bytes(b"\x93NUMPY garbage")
    o = run("dump", "compare", tmp_path / "mine", g, "--out", tmp_path / "o")
    _small(o)
    for m in ("missing.csv", "folder", "latin1.csv"):
        (tmp_path / "folder").mkdir(exist_ok=True)
        (tmp_path / "latin1.csv").write_bytes("op_0,op\xe9\n".encode("latin-1"))
        o = run("dump", "compare", tmp_path / "mine", g, "--mapping", tmp_path / m, "--out", tmp_path / "o2")
        _small(o)
        assert o.code == 2


def test_host_log_copy_skips_fifos_and_links(tmp_path: Path) -> None:
    host = tmp_path / "ascend" / "log" / "debug" / "plog"
    host.mkdir(parents=True)
    (host / "plog-1_20250101000000000.log").write_text("[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [g.cc:1]1 x\n")
    os.mkfifo(host / "plog-2_20250101000000000.log")
    (host / "plog-3_20250101000000000.log").symlink_to("/etc/hostname")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "msnpureport"
    tool.write_text("#!/bin/sh\nmkdir -p 2025-01-01-00-00-00/slog\necho 'msnpureport 1.0'\nexit 0\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ASCEND_PROCESS_LOG_PATH": str(tmp_path / "ascend" / "log")}
    r = subprocess.run([sys.executable, "-m", "npudiag", "logs", "export", "--out", str(tmp_path / "exp"), "--also-host", "--archive"],
                       env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr, r.stderr
    assert "not a regular file" in r.stderr and "a link; not copied" in r.stderr
    with tarfile.open(tmp_path / "exp.tar.gz") as tar:
        assert not [m for m in tar.getmembers() if m.issym() or m.islnk()]


def test_archive_of_many_long_error_lines_stays_small(tmp_path: Path) -> None:
    a = tmp_path / "big.tar.gz"
    # built in another process: the child's peak RSS counts the pages it was forked with, so this test
    # process must never hold the gigabyte itself
    build = (
        "import io, sys, tarfile\n"
        "line = '[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [g.cc:1]1 failed ' + 'z' * 65_000 + '\\n'\n"
        "data = (line * 16_000).encode()\n"
        "with tarfile.open(sys.argv[1], 'w:gz') as tar:\n"
        "    info = tarfile.TarInfo('plog/plog-1_20250101000000000.log')\n"
        "    info.size = len(data)\n"
        "    tar.addfile(info, io.BytesIO(data))\n"
    )
    subprocess.run([sys.executable, "-c", build, str(a)], check=True)
    assert a.stat().st_size < 3_000_000
    o = run("logs", "parse", a, "--out", tmp_path / "o", "--json")
    one_line_or_clean(o)
    # 1 GB of text once inflated: bounded by the per-record and per-chunk caps, not by the input (5.2 GB before)
    assert o.rss_mb <= 400 and json.loads(o.stdout)["records"] == 16_000


def test_negative_durations_in_trace_and_db_are_left_out(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t" / "trace_view.json", [_task("A", "10.000", 5.0), _task("B", "20.000", -3.0), _task("C", "30.000", 1.0)])
    o = run("analyze", path, "--out", tmp_path / "o", "--json")
    data = json.loads(o.stdout)
    assert data["profile"]["kernels"] == 2 and any("negative start or duration" in w for w in data["warnings"])
    db = _db(tmp_path / "msprof_1.db", 3, 1)
    con = sqlite3.connect(db)
    con.execute("UPDATE TASK SET endNs = startNs - 100 WHERE taskId = 1")
    con.commit()
    con.close()
    o = run("analyze", db, "--out", tmp_path / "o2", "--json")
    data = json.loads(o.stdout)
    assert data["profile"]["kernels"] == 2 and any("negative start or duration" in w for w in data["warnings"])
