"""Faults: kill -9 while writing, existing output folders, read-only inputs, hostile folders, children."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from npudiag.dump.formats.dump_file import read_dump
from npudiag.errors import InputError
from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.op_statistic import read_op_statistic
from npudiag.profiling.formats.trace_json import read_trace
from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file
from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .conftest import CORPUS_ROOT, ROOT
from .helpers import msprof_standin_path, run_cli

# child processes killed, hanging children, hostile folders
pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parent / "fixtures" / "bad"
READERS = {"kernel_details": read_kernels, "op_statistic": read_op_statistic, "trace_view": read_trace, "Op": read_dump}


@pytest.mark.parametrize("name", sorted(p.name for p in BAD.iterdir() if p.name != "README.md"))
def test_known_bad_inputs(name: str) -> None:
    reader = READERS[name.split(".")[0]]
    with pytest.raises(InputError) as info:
        reader(BAD / name)
    assert str(BAD / name) in info.value.one_line()


def _complete(out: Path) -> None:
    """Every file of an --out folder is whole: the manifest lists what it wrote, every Parquet reads."""
    assert (out / "manifest.json").is_file()
    for p in out.iterdir():
        assert not p.name.startswith(".") and not p.name.endswith(".tmp"), p
        if p.suffix == ".parquet":
            pq.read_table(p)


def test_kill_9_while_writing_never_leaves_a_half_output(tmp_path: Path) -> None:
    write_torch_profile(tmp_path / "p", kernels=60_000, seed=5, copies=20, steps=8)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "npudiag", "analyze", str(tmp_path / "p"), "--out", str(out), "--quiet", "--json"]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True)
    full = time.monotonic() - t0
    _complete(out)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    rng = random.Random(20261202)
    kills = 0
    for _ in range(20):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, full))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        _complete(out)  # the previous complete run, or the new complete run: never a mixture
        if proc.returncode == -signal.SIGKILL:
            assert sorted(p.name for p in out.iterdir()) == sorted(before)
    assert kills >= 10
    subprocess.run(cmd, check=True, capture_output=True)
    _complete(out)
    assert not list(tmp_path.glob(".out.tmp-*"))  # the killed runs' temporary folders were cleaned up


def test_existing_out_folder_not_written_by_npudiag_is_refused(tmp_path: Path) -> None:
    gt = write_msprof_profile(tmp_path / "p", kernels=200, seed=2, copies=2)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    r = run_cli("analyze", gt.profile_dir, "--out", mine, "--quiet")
    assert r.returncode == 2 and "use --force" in r.stderr and (mine / "notes.txt").read_text() == "keep"
    forced = run_cli("analyze", gt.profile_dir, "--out", mine, "--quiet", "--force")
    assert forced.returncode == 0 and not (mine / "notes.txt").exists()
    _complete(mine)


def _tree_sha(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_inputs_are_never_modified(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    write_torch_profile(inputs / "base", kernels=800, seed=1, steps=8)
    write_torch_profile(inputs / "cur", kernels=800, seed=1, steps=8)
    write_dump_file(
        model_dump_dir(inputs / "dump") / dump_file_name("Add", "a", 1, 1, 1764246877073569),
        "a",
        [Tensor(__import__("numpy").ones(4, "float32"))],
        [],
    )
    corpus = CORPUS_ROOT
    if (corpus / "logs").is_dir():
        shutil.copytree(corpus / "logs", inputs / "logs")
    if (corpus / "msprof").is_dir():
        shutil.copytree(corpus / "msprof" / "msinsight-pytorch-text-2025", inputs / "msprof")
    (inputs / "acl.json").write_text('{"dump": {"dump_path": "./", "dump_list": [], "dump_op_switch": "on"}}')
    for p in [*inputs.rglob("*"), inputs]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = _tree_sha(inputs)
    work = tmp_path / "work"
    work.mkdir()
    commands = [
        ("analyze", inputs / "base", "--quiet"),
        ("compare", inputs / "base", inputs / "cur", "--json"),
        ("gate", inputs / "base", inputs / "cur", "--quiet"),
        ("dump", "parse", inputs / "dump"),
        ("dump", "check", inputs / "acl.json"),
    ]
    if (inputs / "logs").is_dir():
        commands.append(("logs", "parse", inputs / "logs"))
    if (inputs / "msprof").is_dir():
        commands.append(("analyze", inputs / "msprof", "--quiet"))
    for c in commands:
        r = run_cli(*c, cwd=work)
        assert r.returncode in (0, 1), (c, r.stderr)
        assert "Traceback" not in r.stderr
    for p in [*inputs.rglob("*"), inputs]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert _tree_sha(inputs) == before


def test_hostile_folders_finish_and_say_what_was_skipped(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "plog").mkdir(parents=True)
    (root / "plog" / "plog-1_20250101000000000.log").write_text(
        "[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [g.cc:1]1 F:runtime result = 507014.\n"
    )
    os.mkfifo(root / "plog" / "plog-2_20250101000000000.log")  # a FIFO must not block the walk
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "plog" / "plog-3_20250101000000000.log"))
    (root / "loop").symlink_to(root, target_is_directory=True)
    many = root / "many"
    many.mkdir()
    for i in range(100_000):
        (many / f"f{i}.bin").touch()
    # in a child, whose timeout catches a read that blocks on the FIFO (a hang guard, not a speed test)
    r = run_cli("logs", "parse", root, "--out", tmp_path / "o", "--json", process=True)
    sock.close()
    assert r.returncode == 0, r.stderr
    assert "plog-2_20250101000000000.log: not a regular file, skipped" in r.stderr
    assert "plog-3_20250101000000000.log: not a regular file, skipped" in r.stderr
    prof = tmp_path / "prof"
    write_msprof_profile(prof / "a", kernels=100, seed=1, copies=1)
    (prof / "loop").symlink_to(prof, target_is_directory=True)
    os.mkfifo(prof / "op_summary_20260605155140.csv")
    a = run_cli("analyze", prof, "--out", tmp_path / "ao", "--json", process=True)
    assert a.returncode == 0 and "Traceback" not in a.stderr
    warnings = json.loads(a.stdout)["warnings"]
    assert any("already visited (symlink loop)" in w for w in warnings)
    assert any("op_summary_20260605155140.csv: not a regular file" in w for w in warnings)
    assert (tmp_path / "ao" / "manifest.json").is_file()


@pytest.fixture
def msprof_env(tmp_path: Path) -> dict[str, str]:
    return {**msprof_standin_path(tmp_path / "bin"), "HOME": str(tmp_path)}


def test_hanging_child_is_stopped_by_timeout(tmp_path: Path, msprof_env: dict[str, str]) -> None:
    app = tmp_path / "hang.py"
    app.write_text("import time\ntime.sleep(120)\n")
    r = run_cli(
        "profile", "--timeout", "2", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a", sys.executable, app,
        cwd=tmp_path, env=msprof_env,
    )  # fmt: skip
    # the child sleeps 120 s: the message says the --timeout stopped it, not that it ended by itself
    assert "stopped after the --timeout of 2 s" in r.stderr and r.returncode != 0


def test_child_killed_by_a_signal_is_reported(tmp_path: Path, msprof_env: dict[str, str]) -> None:
    app = tmp_path / "die.py"
    app.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    r = run_cli("profile", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a", sys.executable, app, cwd=tmp_path, env=msprof_env)
    assert r.returncode == 137 and "killed by signal 9 (SIGKILL)" in r.stderr


def test_killing_npudiag_leaves_no_orphan_child(tmp_path: Path, msprof_env: dict[str, str]) -> None:
    app = tmp_path / "slow.py"
    marker = tmp_path / "msprof.pid"
    app.write_text(f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getppid()))\ntime.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "npudiag", "profile", "--collect-dir", str(tmp_path / "p"), sys.executable, str(app)],
        env={**os.environ, **msprof_env}, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    msprof_pid = int(marker.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(msprof_pid, 0)
        except ProcessLookupError:
            break
        try:  # reap it if it became our zombie
            with open(f"/proc/{msprof_pid}/stat") as fh:
                if fh.read().split()[2] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"msprof (pid {msprof_pid}) outlived the killed npudiag")


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    gt = write_msprof_profile(tmp_path / "p", kernels=100, seed=1, copies=1)
    old = os.umask(0o027)
    try:
        r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--quiet")
    finally:
        os.umask(old)
    assert r.returncode == 0
    assert stat.S_IMODE((tmp_path / "o" / "kernels.parquet").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "o").stat().st_mode) == 0o750


def test_a_100_mb_single_line_costs_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    import pyarrow as pa

    from npudiag.logs.ingest import read_logs
    from npudiag.logs.sources import find_sources

    log = tmp_path / "plog-1_20250101000000000.log"
    with open(log, "w") as fh:
        fh.write("[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [g.cc:1]1 F:")
        fh.write("y" * 100_000_000)
        fh.write("\n[ERROR] GE(1,p):2025-01-01-00:00:01.000.000 [g.cc:2]1 F:runtime result = 507014.\n")
    pool = pa.default_memory_pool()
    base_arrow = pool.bytes_allocated()
    tracemalloc.start()
    run = read_logs(find_sources(str(log), []), tmp_path / "e.parquet")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert run.totals["records"] == 2 and "507014" in run.problems["error_codes"][1].as_py()
    assert "more characters cut by npudiag" in run.problems["message"][0].as_py()
    assert peak < 32 << 20 and pool.bytes_allocated() - base_arrow < 32 << 20  # stated bound: 32 MB each (1 MB line cap)
    csv = tmp_path / "op_summary_20260605155140.csv"
    with open(csv, "w") as fh:
        fh.write("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)\n")
        fh.write("0," + "9" * 100_000_000 + "\n")
    tracemalloc.start()
    with pytest.raises(InputError, match="longer than the reader's block size"):
        read_kernels(csv)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 32 << 20


def test_no_shell_eval_or_pickle_in_the_package() -> None:
    import re

    pkg = ROOT / "npudiag"
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        assert "shell=True" not in text, f
        assert not re.search(r"\beval\(|\bexec\(|pickle|yaml\.load\(|allow_pickle=True|os\.system\(", text), f
