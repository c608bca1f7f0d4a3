"""Hostile input IV: outputs that never land on inputs, numbers and configs that cannot crash, bombs
that cost their bytes, and signals that leave nothing behind. One test per family of the probe; the
SQL family is in tests/test_sql.py, the Mann-Whitney sizes in tests/test_stats.py and test_gate.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npudiag.testing.generate import write_torch_profile

from .conftest import ROOT
from .helpers import run_cli

SAMPLE = ROOT / "fixtures" / "sample_torch"


def _profile(tmp_path: Path) -> Path:
    prof = tmp_path / "prof"
    shutil.copytree(SAMPLE, prof)
    return prof


def _trace(prof: Path) -> Path:
    return next(prof.rglob("trace_view.json"))


# -- outputs aimed at inputs ------------------------------------------------------------------------


def test_a_single_file_output_never_replaces_an_input_or_an_out_folder_member(tmp_path: Path) -> None:
    """`--html r.html` with r.html a link to an input's trace_view.json replaced the trace; so did
    `--chrome-trace` through a link to kernel_details.csv; `report OUT --html OUT/kernels.parquet` broke
    the out folder; `gate BASE BASE --junit BASE/manifest.json --markdown BASE/steps.parquet` the
    baseline. Each is now one line, exit 2, and every file is as it was."""
    prof = _profile(tmp_path)
    trace, kernels = _trace(prof), next(prof.rglob("kernel_details.csv"))
    before = {p: p.read_bytes() for p in (trace, kernels)}
    (tmp_path / "r.html").symlink_to(trace)
    (tmp_path / "k.json").symlink_to(kernels)
    for args in (("--html", tmp_path / "r.html"), ("--chrome-trace", tmp_path / "k.json")):
        r = run_cli("analyze", prof, "--out", tmp_path / "o", *args)
        assert r.returncode == 2 and "input of this run" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert {p: p.read_bytes() for p in before} == before
    out = tmp_path / "o"
    assert run_cli("analyze", prof, "--out", out, "-q").returncode == 0
    members = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for argv in (("report", out, "--html", out / "kernels.parquet"), ("gate", out, out, "--junit", out / "manifest.json"),
                 ("gate", out, out, "--markdown", out / "steps.parquet")):  # fmt: skip
        r = run_cli(*argv)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (argv, r.stderr)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == members


def test_a_view_npudiag_wrote_into_its_out_folder_is_npudiags(tmp_path: Path) -> None:
    """A second `analyze --out o --html o/report.html` was refused ("not written by npudiag"): the page
    is listed in the folder's manifest as one of its views, which a later run or report may replace."""
    prof, out = _profile(tmp_path), tmp_path / "o"
    for _ in range(2):
        r = run_cli("analyze", prof, "--out", out, "--html", out / "report.html", "-q")
        assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert "report.html" in manifest["files"] and manifest["views"] == ["report.html"]
    assert run_cli("report", out, "--html", out / "report.html", "-q").returncode == 0
    assert run_cli("analyze", prof, "--out", out, "-q").returncode == 0  # the folder is still npudiag's whole


def test_the_github_step_summary_is_appended_to(tmp_path: Path) -> None:
    """docs/gate.md's recipe `--markdown "$GITHUB_STEP_SUMMARY"` replaced what earlier steps wrote."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("# build\n\nearlier step\n")
    for _ in range(2):
        r = run_cli("gate", SAMPLE, SAMPLE, "--markdown", summary, "-q", env={"GITHUB_STEP_SUMMARY": str(summary)})
        assert r.returncode == 0, r.stderr
    text = summary.read_text()
    assert text.startswith("# build\n\nearlier step\n") and text.count("npudiag gate") == 2


# -- configs and numbers ----------------------------------------------------------------------------


def test_acl_json_keys_given_twice_are_refused_and_numbers_keep_their_text(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text('{"profiler": {"switch": "on"}, "dump": {"x": 1e2, "y": 5, "big": ' + "9" * 5000 + '}, "profiler": {}}')
    r = run_cli("profile", "--mode", "acl-json", "--acl-json", acl, "--emit", "acl-json", "--", "python", "x.py", cwd=tmp_path)
    assert r.returncode == 2 and '"profiler" appears twice' in r.stderr and ":1:" in r.stderr, r.stderr
    acl.write_text('{"dump": {"x": 1e2, "y": 5, "z": 0.10, "big": ' + "9" * 5000 + "}}")
    r = run_cli("profile", "--mode", "acl-json", "--acl-json", acl, "--emit", "acl-json", "--", "python", "x.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dump = json.loads(acl.read_text(), parse_int=str, parse_float=str)["dump"]
    assert dump == {"x": "1e2", "y": "5", "z": "0.10", "big": "9" * 5000}  # the user's own numbers, as written


def test_json_integers_past_pythons_limit_are_read(tmp_path: Path) -> None:
    """A 5,000-digit integer in profiler_info, in an out folder's manifest.json or in msprobe's
    dump.json raised Python's int limit (ValueError, exit 3)."""
    prof = _profile(tmp_path)
    info = next(prof.rglob("profiler_info_0.json"))
    info.write_text(info.read_text().rstrip()[:-1] + ', "huge": ' + "9" * 5000 + "}")
    assert run_cli("analyze", prof, "--out", tmp_path / "o", "-q").returncode == 0
    m = tmp_path / "o" / "manifest.json"
    m.write_text(m.read_text().rstrip()[:-1] + ', "huge": ' + "9" * 5000 + "}")
    for argv in (("report", tmp_path / "o", "-q"), ("gate", tmp_path / "o", tmp_path / "o", "-q")):
        r = run_cli(*argv)
        assert r.returncode == 0 and "internal error" not in r.stderr, (argv, r.stderr)
    for side, value in (("a", "1.0"), ("b", "1" + "0" * 400)):
        doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
               "data": {"Tensor.add.0.forward": {"input_args": [], "input_kwargs": {}, "output": [
                   {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": "MAX", "Min": 0.0, "Mean": 0.5,
                    "Norm": 1.0, "requires_grad": False}]}}}  # fmt: skip
        (tmp_path / "ms" / side).mkdir(parents=True)
        (tmp_path / "ms" / side / "dump.json").write_text(json.dumps(doc).replace('"MAX"', value))
    r = run_cli("dump", "compare", tmp_path / "ms" / "b", tmp_path / "ms" / "a", "--out", tmp_path / "dc", "--no-fail", "-q")
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "toml",
    ["gate = 5", "metric = 5", "[gate]\ntop_ops = inf", "[gate]\nalpha = 0", "[gate]\nmetrics = 5", "[gate]\nmin_delta_us = nan",
     "[gate]\nby = 3", "[metric.step_time_us]\nmin_delta_us = -inf", "a" + ".a" * 2500 + " = 1", "[" + ".".join(["a"] * 3000) + "]"],
)  # fmt: skip
def test_gate_settings_that_cannot_be_are_one_line(tmp_path: Path, toml: str) -> None:
    """Each crashed (TypeError, OverflowError, RecursionError: exit 3) or, for min_delta_us = nan,
    let a +25 % regression pass with exit 0."""
    cfg = tmp_path / "npudiag-gate.toml"
    cfg.write_text(toml + "\n")
    r = run_cli("gate", SAMPLE, SAMPLE, "--config", cfg, "-q")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(cfg.name) in r.stderr, r.stderr


@pytest.mark.parametrize(
    "argv",
    [("gate", SAMPLE, SAMPLE, "--min-delta-us", "nan"), ("gate", SAMPLE, SAMPLE, "--top-ops", "99999999999999999999"),
     ("analyze", SAMPLE, "--top", "99999999999999999999"), ("report", SAMPLE, "--top", "99999999999999999999"),
     ("logs", "parse", SAMPLE, "--device", "99999999999999999999")],
)  # fmt: skip
def test_numbers_on_the_command_line_that_cannot_be_are_one_line(tmp_path: Path, argv: tuple) -> None:
    r = run_cli(*argv, cwd=tmp_path)
    assert r.returncode == 2 and "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_dask_backend_without_its_extra_is_a_usage_error(tmp_path: Path) -> None:
    code = "import sys; sys.modules['distributed'] = None; from npudiag.cli import main; sys.argv[0] = 'npudiag'; main()"
    r = subprocess.run([sys.executable, "-c", code, "analyze", str(SAMPLE), "--dask", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "pip install 'npudiag[distributed]'" in r.stderr and "internal error" not in r.stderr, r.stderr


# -- bombs and hangs ----------------------------------------------------------------------------------


def test_a_zip_whose_members_overlap_is_refused(tmp_path: Path) -> None:
    """8 central-directory entries pointing at one member: Python 3.11.7's zipfile inflates it 8 times."""
    import io
    import struct
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("plog/plog-1_20250101000000000.log", b"[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [g.cc:1]1 failed\n" * 1000)
    raw = buf.getvalue()
    eocd = raw.rfind(b"PK\x05\x06")
    cd_off = struct.unpack("<I", raw[eocd + 16 : eocd + 20])[0]
    entry, entries = raw[cd_off:eocd], b""
    for i in range(8):
        name = f"plog/plog-{i + 1}_20250101000000000.log".encode()
        e = bytearray(entry)
        old = struct.unpack("<H", e[28:30])[0]
        e = e[:46] + name + e[46 + old :]
        e[28:30] = struct.pack("<H", len(name))
        entries += bytes(e)
    end = bytearray(raw[eocd:])
    end[8:12] = struct.pack("<HH", 8, 8)
    end[12:20] = struct.pack("<II", len(entries), cd_off)
    (tmp_path / "bomb.zip").write_bytes(raw[:cd_off] + entries + bytes(end))
    assert len(zipfile.ZipFile(tmp_path / "bomb.zip").infolist()) == 8
    r = run_cli("logs", "parse", tmp_path / "bomb.zip", "--out", tmp_path / "o")
    assert r.returncode == 2 and "overlap" in r.stderr and not (tmp_path / "o").exists(), r.stderr


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_doctor_reads_version_files_bounded(tmp_path: Path, kind: str) -> None:
    """version.cfg linked to /dev/zero was read until MemoryError; a FIFO hung doctor."""
    toolkit = tmp_path / "latest"
    toolkit.mkdir()
    if kind == "zero":
        (toolkit / "version.cfg").symlink_to("/dev/zero")
    else:
        os.mkfifo(toolkit / "version.cfg")
    r = run_cli("doctor", "--json", env={"ASCEND_TOOLKIT_HOME": str(toolkit)}, process=True)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


def test_an_export_made_inside_the_host_logs_does_not_copy_itself(tmp_path: Path) -> None:
    """`logs export --also-host` run inside the host log folder copied the export into itself: 409
    folders deep, paths to PATH_MAX, a 12 KB error line."""
    from .helpers import with_standins

    host = tmp_path / "ascend" / "log" / "debug"
    (host / "plog").mkdir(parents=True)
    (host / "plog" / "plog-9_20250101000000000.log").write_text("[ERROR] HCCL(9,p):2025-01-01-00:00:00.000.000 [h.cc:1][9]failed\n")
    env = with_standins({"ASCEND_PROCESS_LOG_PATH": str(host)})
    r = run_cli("logs", "export", "--out", host / "exp", "--also-host", "-q", cwd=host, env=env)
    assert r.returncode == 0, r.stderr
    assert (host / "exp" / "host" / "debug" / "plog" / "plog-9_20250101000000000.log").is_file()
    assert not (host / "exp" / "host" / "debug" / "exp").exists()
    assert max(len(str(p)) for p in (host / "exp").rglob("*")) < 400


def test_a_dump_file_cut_while_it_is_read_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump file truncated by another process while `dump parse --npy` read it: SIGBUS (a memory map
    over a shrinking file), the staging folder and the lock left behind. The tensors are read, not
    mapped: the short read is one line naming the file, and the other files are parsed."""
    import numpy as np

    from npudiag.dump import ingest as dump_ingest
    from npudiag.testing.dump_writer import Tensor, write_dump_file

    d = tmp_path / "dump"
    d.mkdir()
    a = write_dump_file(d / "Add.add_1.1.2.1764246877073569", "add_1", [Tensor(np.ones((64, 64), np.float32))], [])
    write_dump_file(d / "Mul.mul_1.1.2.1764246877073570", "mul_1", [Tensor(np.ones((8,), np.float32))], [])
    real = dump_ingest.read_dump

    def read_then_cut(path: Path):  # the header is read whole, then another process cuts the file
        dump = real(path)
        if path == a:
            with open(path, "r+b") as fh:
                fh.truncate(dump.tensors[0].offset + 100)
        return dump

    monkeypatch.setattr(dump_ingest, "read_dump", read_then_cut)
    r = run_cli("dump", "parse", d, "--out", tmp_path / "o", "--npy", tmp_path / "npy", "--json")
    assert r.returncode == 2 and "it changed while it was read" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [t["op_name"] for t in json.loads(r.stdout)["tensors_table"]] == ["mul_1"]  # the other file's tensor
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o")]  # no staging, no lock


def test_time_is_linear_in_rows_whatever_the_number_of_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 one-kernel steps took 19.6 s against 1.5 s in one step (a timeline per step), and cluster
    52 s (a filter of the table per step). Counted, not timed: the step breakdown merges each rank's
    intervals in four array passes and the cluster views group the steps once, for 2,000 steps as for 2."""
    from npudiag.profiling.analysis import cluster as cl
    from npudiag.profiling.analysis import step_breakdown as sb

    calls = {"merge": 0, "groups": 0, "filter": 0}
    real_merge, real_groups = sb.grouped_merge, cl.StepGroups.of.__func__

    def merge(*a):
        calls["merge"] += 1
        return real_merge(*a)

    def groups(klass, table):
        calls["groups"] += 1
        return real_groups(klass, table)

    monkeypatch.setattr(sb, "grouped_merge", merge)
    monkeypatch.setattr(cl.StepGroups, "of", classmethod(groups))
    for rank in range(2):
        write_torch_profile(tmp_path / "c" / f"r{rank}", kernels=2000, steps=2000, copies=0, seed=rank, rank=rank)
    r = run_cli("cluster", tmp_path / "c", "--out", tmp_path / "o", "--json", env={"NPUDIAG_WORKERS": "1"})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 2000
    assert calls["merge"] == 4 * 2, calls  # four unions (compute, communication, either, all) per rank
    assert calls["groups"] <= 4, calls  # the per-step view, the slow ranks, the stages: one grouping each


# -- signals and terminals ----------------------------------------------------------------------------


def test_a_signal_inside_a_callback_still_unwinds_the_run(tmp_path: Path) -> None:
    """CI saw SIGTERM land in importlib's module-lock weakref callback: its KeyboardInterrupt was printed as
    "Exception ignored ... Traceback" and dropped, and the run went on to exit 0. The run's hook delivers
    such an interrupt again, so it unwinds from ordinary code, silently."""
    script = tmp_path / "s.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from npudiag import cli\n"
        "terminated = cli._note_terminations()\n"
        "sys.unraisablehook = cli._redelivering([], terminated, sys.unraisablehook)\n"
        "class D:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        for _ in range(1000): pass\n"
        "try:\n"
        "    D()\n"
        "    time.sleep(5)\n"
        "    print('went on')\n"
        "except KeyboardInterrupt:\n"
        "    print('unwound', len(terminated))\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["unwound", "2"] and r.stderr == "", (r.stdout, r.stderr)


@pytest.mark.slow
def test_sigterm_unwinds_like_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM mid-analyze left `.o.lock` and `.o.tmp-PID-*` (SIGINT cleaned up): now the same unwinding,
    the old output intact, exit 143."""
    write_torch_profile(tmp_path / "p", kernels=200_000, steps=4, copies=0)
    out = tmp_path / "o"
    assert run_cli("analyze", tmp_path / "p", "--out", out, "-q").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    ended = []
    for delay in (0.6, 1.2, 2.0):
        proc = subprocess.Popen([sys.executable, "-m", "npudiag", "analyze", str(tmp_path / "p"), "--out", str(out), "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
        ended.append(proc.returncode)
        assert proc.returncode in (0, 143) and "Traceback" not in err, (proc.returncode, err)
        if proc.returncode == 143:
            assert err.strip().splitlines()[-1] == "npudiag: terminated"
        assert sorted(p.name for p in out.iterdir()) == before
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".o")]  # no lock, no staging
    assert 143 in ended


def test_what_msnpureport_prints_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """`logs level` and `logs export` relayed msnpureport's own output raw: OSC 8 links, ESC[2J, C1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "msnpureport"
    tool.write_text("#!/bin/sh\nprintf 'level \\033[2J\\033]8;;http://x\\033\\\\link\\033]8;;\\033\\\\ \\302\\205 ok\\n'\nexit 0\n")
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    r = run_cli("logs", "level", "--request", "-q", env=env)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\x85" not in r.stdout + r.stderr and "level" in r.stdout


@pytest.mark.parametrize("columns", ["0", "5", "-3", "abc"])
def test_a_width_no_table_fits_is_taken_as_unknown(tmp_path: Path, columns: str) -> None:
    """COLUMNS=0: report, sql and logs parse printed nothing and exited 0."""
    assert run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "-q").returncode == 0
    r = run_cli("report", tmp_path / "o", env={"COLUMNS": columns})
    assert r.returncode == 0 and "Hot operators" in r.stdout and max(len(x) for x in r.stdout.splitlines()) <= 80
    s = run_cli("sql", tmp_path / "o", "SELECT count(*) AS n FROM kernels", env={"COLUMNS": columns})
    assert s.returncode == 0 and ("1,200" in s.stdout or "1200" in s.stdout)


def test_check_refuses_what_analyze_refuses(tmp_path: Path) -> None:
    """check said "present" for a UTF-16 kernel_details.csv and a megabyte of header that analyze refuses."""
    for how in ("utf16", "columns"):
        prof = tmp_path / how
        shutil.copytree(SAMPLE, prof)
        k = next(prof.rglob("kernel_details.csv"))
        text = k.read_text()
        if how == "utf16":
            k.write_bytes(text.encode("utf-16"))
        else:
            head, _, rest = text.partition("\n")
            k.write_text(head + "," + ",".join(f"c{i}" for i in range(200_000)) + "\n" + rest)
        a = run_cli("analyze", prof, "--out", tmp_path / f"o-{how}", "-q")
        c = run_cli("check", prof, "--json")
        assert "kernel_details.csv" in a.stderr, a.stderr
        doc = json.loads(c.stdout)
        rows = [d for p in doc["profiles"] for d in p["data"] if d["data"] == "kernels"]
        assert any(d["status"] == "unreadable" and "kernel_details.csv" in (d["found_in"] or "") for d in rows), rows


def test_names_that_are_not_utf8_are_read_and_shown_escaped(tmp_path: Path) -> None:
    """A file or folder name whose bytes are not UTF-8 (Linux allows any bytes but / and NUL): read like
    any other, shown with the byte escaped (\\xff), never an internal error."""
    import numpy as np

    from npudiag.testing.dump_writer import Tensor, dump_file_name, write_dump_file

    logs = Path(os.fsdecode(bytes(tmp_path) + b"/logs_\xff"))
    logs.mkdir()
    (logs / os.fsdecode(b"plog-4242_\xfe.log")).write_text(
        "[ERROR] HCCL(4242,python3):2026-03-18-10:33:52.113.650 [hccl_socket_manager.cc:624] [18744]   |  comm error, device[1]\n"
    )
    r = run_cli("logs", "parse", logs, "-o", tmp_path / "lo", "--json")
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert doc["first_error"]["file"].endswith("logs_\\xff/plog-4242_\\xfe.log") and doc["first_error"]["device_id"] == 1
    dumps = Path(os.fsdecode(bytes(tmp_path) + b"/dump_\xff"))
    dumps.mkdir()
    name = dump_file_name("Relu", os.fsdecode(b"relu\xfd"), 2, 2, 1700000000000001)
    write_dump_file(dumps / name, "relu", [Tensor(np.ones((2, 2), np.float32))], [Tensor(np.ones((2, 2), np.float32))])
    r = run_cli("dump", "parse", dumps, "-o", tmp_path / "do")
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    assert "relu\\xfd" in r.stdout
