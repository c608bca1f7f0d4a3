"""Where npudiag writes, and what it never replaces (npudiag/output/), each case checked on the tree
around the target: devices and FIFOs are written into, links resolved once and only when the user could
have made them, a folder replaced only when npudiag wrote every file in it, never a file, an input, HOME,
/ or the working folder, even with --force."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from npudiag import output
from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file
from npudiag.testing.generate import write_torch_profile

from .conftest import ROOT
from .helpers import run_cli
from .hostile import changed_outside, snapshot

SAMPLE = ROOT / "fixtures" / "sample_torch"
MSPROF = ROOT / "fixtures" / "sample_msprof"
ROOT_USER = os.geteuid() == 0


def _one_error(r) -> str:
    lines = [x for x in r.stderr.splitlines() if not x.startswith("npudiag: warning") and "more warning" not in x]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- targets that are not regular files or folders ------------------------------------------------------


@pytest.mark.skipif(not ROOT_USER, reason="making a character device needs root")
def test_a_character_device_is_written_into_never_replaced(tmp_path: Path) -> None:
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--html", dev, "--chrome-trace", dev, "-q")
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == os.makedev(1, 3)
    assert _hidden(tmp_path) == []


def test_a_fifo_is_written_into_and_its_reader_gets_the_page(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--html", fifo, "-q")
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert run_cli("report", tmp_path / "o", "-q").returncode == 0
    run_cli("analyze", SAMPLE, "--out", tmp_path / "o2", "--html", tmp_path / "plain.html", "-q")
    assert got and got[0].lower().startswith(b"<!doctype html>") and len(got[0]) == (tmp_path / "plain.html").stat().st_size


def test_chrome_trace_to_dev_stdout_streams_strict_json(tmp_path: Path) -> None:
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--chrome-trace", "/dev/stdout", "-q", process=True)
    assert r.returncode == 0, r.stderr
    events = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert isinstance(events, list) and any(e.get("name") == "process_name" for e in events)


def test_a_socket_or_a_folder_where_a_file_is_expected_is_one_line(tmp_path: Path) -> None:
    sock_path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        (tmp_path / "folder.html").mkdir()
        before = snapshot(tmp_path)
        for target, what in ((sock_path, "a socket"), (tmp_path / "folder.html", "a folder")):
            r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--html", target, "-q")
            assert what in _one_error(r)
        assert changed_outside(before, snapshot(tmp_path), ["o"]) == []
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        s.close()


# -- what is never replaced ------------------------------------------------------------------------------


def test_gate_update_baseline_never_deletes_other_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html></html>")
    (site / "data.csv").write_text("a,b\n")
    assert run_cli("analyze", SAMPLE, "--out", site / "run", "-q").returncode == 0
    before = snapshot(tmp_path)
    r = run_cli("gate", SAMPLE, SAMPLE, "--update-baseline", site, "-q")
    line = _one_error(r)
    assert "index.html" in line and "data.csv" in line
    assert changed_outside(before, snapshot(tmp_path), []) == []


@pytest.mark.parametrize("case", ["ancestor of the input", "the input", "a file", "the working folder", "HOME", "/"])
def test_force_never_replaces_a_file_an_input_home_root_or_the_working_folder(tmp_path: Path, case: str) -> None:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    write_torch_profile(proj / "data", kernels=100, copies=2)
    (proj / "NOTES.md").write_text("notes")
    (tmp_path / "notes.txt").write_text("precious")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("x")
    out = {"ancestor of the input": proj, "the input": proj / "data", "a file": tmp_path / "notes.txt",
           "the working folder": Path("."), "HOME": home, "/": Path("/")}[case]  # fmt: skip
    before = snapshot(tmp_path)
    r = run_cli("analyze", proj / "data", "--out", out, "--force", "-q", cwd=proj / "data" if case == "the working folder" else tmp_path,
                env={"HOME": str(home)})  # fmt: skip
    line = _one_error(r)
    assert "never" in line, line
    assert changed_outside(before, snapshot(tmp_path), []) == []


def _dump_tree(root: Path) -> Path:
    import numpy as np

    d = model_dump_dir(root)
    x = np.ones((2, 4), np.float32)
    write_dump_file(d / dump_file_name("Add", "add0", 1, 1, 1764246877073569), "add0", [Tensor(x)], [Tensor(x)])
    return root


def _logs(root: Path) -> Path:
    p = root / "debug" / "plog"
    p.mkdir(parents=True)
    (p / "plog-1_20250101000000000.log").write_text("[ERROR] RUNTIME(1,p):2025-01-01-00:00:00.000.000 [a.cc:1]1 x: failed\n")
    return root


def _writers(tmp: Path, out: Path) -> dict[str, list]:
    dump = _dump_tree(tmp / "dump")
    logs = _logs(tmp / "logs")
    for rank in range(2):
        write_torch_profile(tmp / "cl", kernels=100, seed=1, steps=2, rank=rank, copies=1)
    return {
        "analyze": ["analyze", MSPROF, "--out", out],
        "logs parse": ["logs", "parse", logs, "--out", out],
        "dump parse": ["dump", "parse", dump, "--out", out],
        "dump parse --npy": ["dump", "parse", dump, "--out", tmp / "dp", "--npy", out],
        "dump compare": ["dump", "compare", dump, dump, "--out", out],
        "cluster": ["cluster", tmp / "cl", "--out", out],
        "compare": ["compare", MSPROF, MSPROF, "--out", out],
    }


@pytest.mark.parametrize("command", ["analyze", "logs parse", "dump parse", "dump parse --npy", "dump compare", "cluster", "compare"])
def test_every_folder_writer_refuses_a_folder_of_other_files_and_replaces_its_own(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"tool": "another"}')
    argv = _writers(tmp_path, out)[command]
    before = snapshot(out)
    line = _one_error(run_cli(*argv, "-q"))
    assert "summary.json" in line and "was not written by npudiag" in line and "--force" in line
    assert snapshot(out) == before
    # --force replaces a folder of other files (none of the protected ones)
    assert run_cli(*argv, "-q", "--force").returncode in (0, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert manifest["files"] == [p for p in on_disk if p != "manifest.json"] and manifest["output"]
    if (out / "summary.json").exists():  # logs parse and dump parse write one of their own
        assert "another" not in (out / "summary.json").read_text()
    # then npudiag's own folder is replaced without --force; one more file of the user's is not
    assert run_cli(*argv, "-q").returncode in (0, 1)
    (out / "my_notes.txt").write_text("mine")
    assert "my_notes.txt" in _one_error(run_cli(*argv, "-q"))
    assert (out / "my_notes.txt").read_text() == "mine"
    assert _hidden(tmp_path) == []


def test_an_older_npudiag_out_folder_without_a_file_list_is_still_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli("analyze", SAMPLE, "--out", out, "-q").returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["files"], manifest["output"], manifest["parquet_rows"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert run_cli("analyze", MSPROF, "--out", out, "-q").returncode == 0
    (out / "extra.txt").write_text("x")
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["files"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert "extra.txt" in _one_error(run_cli("analyze", SAMPLE, "--out", out, "-q"))


# -- links, locks, staging --------------------------------------------------------------------------------


def test_a_link_planted_at_the_lock_is_never_followed(tmp_path: Path) -> None:
    outs = tmp_path / "outs"
    outs.mkdir()
    victim = tmp_path / "victim"
    (outs / ".o.lock").symlink_to(victim)
    line = _one_error(run_cli("analyze", SAMPLE, "--out", outs / "o", "-q"))
    assert "link" in line
    assert not victim.exists() and not (outs / "o").exists() and _hidden(outs) == [".o.lock"]


def test_a_stale_lock_of_a_killed_run_is_taken_over_and_removed(tmp_path: Path) -> None:
    (tmp_path / ".o.lock").write_text("")
    assert run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "-q").returncode == 0
    assert _hidden(tmp_path) == []


def test_a_dangling_link_as_out_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "o").symlink_to(tmp_path / "nowhere" / "x")
    line = _one_error(run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "-q"))
    assert "does not exist" in line and _hidden(tmp_path) == [] and not (tmp_path / "nowhere").exists()


def test_a_link_to_an_npudiag_folder_is_written_through_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real"
    assert run_cli("analyze", MSPROF, "--out", real, "-q").returncode == 0
    (tmp_path / "link").symlink_to(real)
    assert run_cli("analyze", SAMPLE, "--out", tmp_path / "link", "-q").returncode == 0
    assert (tmp_path / "link").is_symlink() and json.loads((real / "manifest.json").read_text())["inputs"][0]["path"].find(
        "sample_torch") >= 0  # fmt: skip
    assert _hidden(tmp_path) == []


@pytest.mark.skipif(not ROOT_USER, reason="a link owned by another user needs root to make")
def test_a_link_another_user_planted_in_a_shared_folder_is_not_followed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    precious = tmp_path / "precious.html"
    precious.write_text("mine")
    link = shared / "report.html"
    link.symlink_to(precious)
    os.lchown(link, 4242, 4242)
    line = _one_error(run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--html", link, "-q"))
    assert "another user" in line and precious.read_text() == "mine"


def test_killed_runs_staging_is_cleared_and_a_half_swap_put_back(tmp_path: Path) -> None:
    dest = tmp_path / "o"
    assert run_cli("analyze", SAMPLE, "--out", dest, "-q").returncode == 0
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    # a run killed while staging, one of a live process, and one killed between the two renames of
    # a swap without an atomic exchange (the old folder aside, the new not yet in)
    for tag, pid in (("dead", int(dead)), ("live", os.getpid())):
        s = tmp_path / f".o.tmp-{tag}"
        (s / "new").mkdir(parents=True)
        (s / output.STAGING_MARKER).write_text(json.dumps({"pid": pid}))
    other = tmp_path / ".o.tmp-notours"
    other.mkdir()
    # runs killed between making their staging folder (its name carries the pid) and finishing its
    # marker: nothing in them; a live run's such folder stays
    (tmp_path / f".o.tmp-{dead}-unstarted").mkdir()
    (tmp_path / f".o.tmp-{dead}-halfmarker").mkdir()
    (tmp_path / f".o.tmp-{dead}-halfmarker" / output.STAGING_MARKER).write_text('{"pid": 12')
    (tmp_path / f".o.tmp-{os.getpid()}-starting").mkdir()
    os.rename(dest, tmp_path / ".o.tmp-dead" / "old")
    output.remove_stale_staging(dest)
    assert (dest / "manifest.json").is_file() and run_cli("report", dest, "-q").returncode == 0  # the old folder is back
    assert _hidden(tmp_path) == [f".o.tmp-{os.getpid()}-starting", ".o.tmp-live", ".o.tmp-notours"]


def test_a_pid_reused_by_a_later_process_is_not_the_run_that_wrote_the_marker(tmp_path: Path) -> None:
    """A killed run's marker names pid P; P now belongs to a process started after the marker: stale."""
    dest = tmp_path / "o"
    dest.mkdir()
    s = tmp_path / ".o.tmp-reused"
    (s / "new").mkdir(parents=True)
    (s / output.STAGING_MARKER).write_text(json.dumps({"pid": os.getpid(), "started": 1000.0}))  # long before this process
    output.remove_stale_staging(dest)
    assert not s.exists()


def test_without_an_atomic_exchange_the_swap_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.system, "RENAMEAT2", None)
    for sample in (MSPROF, SAMPLE):
        assert run_cli("analyze", sample, "--out", tmp_path / "o", "-q").returncode == 0
    assert "sample_torch" in (tmp_path / "o" / "manifest.json").read_text() and _hidden(tmp_path) == []


def test_a_single_file_output_keeps_its_permissions_and_never_overwrites_an_input(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text("old")
    os.chmod(page, 0o640)
    assert run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--html", page, "-q").returncode == 0
    assert stat.S_IMODE(page.stat().st_mode) == 0o640 and page.read_text().lower().startswith("<!doctype")
    csv_in = next(SAMPLE.rglob("kernel_details.csv"))
    copy = tmp_path / "kernel_details.csv"
    copy.write_bytes(csv_in.read_bytes())
    before = copy.read_bytes()
    assert "input" in _one_error(run_cli("analyze", copy, "--out", tmp_path / "o3", "--html", copy, "-q"))
    assert copy.read_bytes() == before


def test_a_folder_is_on_disk_before_it_is_swapped_in(tmp_path: Path, monkeypatch) -> None:
    """Files in a staging folder are not flushed as they are written (a flush per file and folder was 8 %
    of a 256-rank analyze); the commit flushes every file and folder of it, and only those (no syncfs:
    other programs' data is not waited for), in one pass before the swap."""
    from npudiag import output

    calls: list[str] = []
    real_fsync, real_swap = os.fsync, output.folders.swap_in

    def fsync(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def swap_in(*a) -> None:
        calls.append("swap")
        real_swap(*a)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(output.folders, "swap_in", swap_in)
    with output.OutputFolder(tmp_path / "o", kind="test") as folder:
        for rel in ("a/rank=0/part-0.bin", "a/rank=1/part-0.bin", "b.json"):
            output.atomic_write(folder.work / rel, lambda fh: fh.write(b"x"))
        assert not calls  # nothing flushed while writing
        folder.commit({})
    assert calls.count("swap") == 1, calls
    before = calls[: calls.index("swap")]
    flushed = {c.split("/new/", 1)[-1] for c in before if "/new/" in c}
    assert {"a/rank=0/part-0.bin", "a/rank=1/part-0.bin", "b.json", "manifest.json", "a", "a/rank=0"} <= flushed, calls
    assert all(str(tmp_path) in c for c in before), before  # only what npudiag wrote
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["a", "b.json", "manifest.json"]
