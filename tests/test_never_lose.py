"""Never lose a user's file: kill -9 at any moment of any writer leaves the old complete output or the
new complete one; a full disk the same, with one line and exit 2; what a killed run left is cleaned up.

Every command that writes is run over an existing output of its own (the "old" one, from other
inputs), SIGKILLed 20 times at random moments of its run and right after chosen renames (the first
file renamed into place, the middle one, the swap of the folder), and the target is checked after
each kill: a folder is complete (its manifest lists exactly the files in it, every Parquet file reads
and holds the rows recorded) and equal file for file to the old output or to the new one; a single
file is byte for byte the old one or the new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file
from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .conftest import ROOT
from .forkrun import ForkRunner

# kill -9 and full disks at random moments, in child processes
pytestmark = pytest.mark.slow

PLOG = "[ERROR] RUNTIME(1365,python3):2025-08-06-23:09:35.772.604 [stars_engine.cc:1551]6219 Task run failed, device_id=3, task_id={n}\n"
INFO = "[INFO] GE(1365,python3):2025-08-06-23:09:35.772.604 [graph_manager.cc:{n}]6219 RunGraph:Run graph {n} success\n"


def _logs(folder: Path, lines: int) -> Path:
    p = folder / "debug" / "plog"
    p.mkdir(parents=True)
    (p / "plog-1365_20250806230935838.log").write_text("".join((PLOG if i % 50 == 0 else INFO).format(n=i) for i in range(lines)))
    return folder


def _dump(root: Path, ops: int, scale: float) -> Path:
    d = model_dump_dir(root)
    rng = np.random.default_rng(ops)
    for i in range(ops):
        x = rng.normal(size=(16, 64)).astype(np.float32)
        write_dump_file(d / dump_file_name("MatMul", f"op{i}", 10 + i, 1, 1764246877073569 + i), f"op{i}",
                        [Tensor(x)], [Tensor(x * scale)])  # fmt: skip
    return root


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def folder_state(out: Path) -> dict[str, str]:
    """A complete npudiag output folder's content (Parquet and .npy files by hash); fails the test
    when the folder is not complete."""
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() or p.is_symlink())
    assert on_disk == sorted([*manifest["files"], "manifest.json"]), f"{out}: files differ from its manifest"
    state = {}
    for rel in manifest["files"]:
        if rel.endswith(".parquet"):
            assert pq.read_metadata(out / rel).num_rows == manifest["parquet_rows"][rel]
            pq.read_table(out / rel)
        if rel.endswith((".parquet", ".npy")):
            state[rel] = _sha(out / rel)
    return state


def file_state(path: Path) -> str:
    """A single output file's content; JUnit's run timestamp left out (two runs of one gate differ there)."""
    data = path.read_bytes()
    if path.suffix == ".xml":
        data = re.sub(rb' timestamp="[^"]*"', b"", data)
    return hashlib.sha256(data).hexdigest()


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def _describe(parent: Path, names: list[str]) -> str:
    """What a leftover holds (its files and its marker), for the failure message."""
    out = []
    for n in names:
        p = parent / n
        files = sorted(str(f.relative_to(p)) for f in p.rglob("*"))[:8] if p.is_dir() else []
        marker = (p / ".npudiag-staging").read_text()[:200] if (p / ".npudiag-staging").is_file() else None
        out.append(f"{n}: {files} marker={marker!r}")
    return "; ".join(out)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("never_lose")
    write_msprof_profile(w / "old_prof", kernels=300, seed=1, copies=4)
    write_torch_profile(w / "new_prof", kernels=3000, seed=2, copies=10, steps=4)
    for rank in range(2):
        write_torch_profile(w / "old_cluster", kernels=200, seed=3, steps=3, rank=rank, copies=2, repeat_steps=True)
        write_torch_profile(w / "new_cluster", kernels=600, seed=4, steps=3, rank=rank, copies=2, repeat_steps=True)
    for c in ("old_cluster", "new_cluster"):
        (w / c / "ground_truth.json").unlink(missing_ok=True)
    _logs(w / "old_logs", 200)
    _logs(w / "new_logs", 12_000)
    _dump(w / "old_dump", 3, 1.0)
    _dump(w / "new_dump", 20, 1.0)
    _dump(w / "new_golden", 20, 1.01)
    return w


# name -> (old argv, new argv, targets: (path, "folder" | "file"))
def _scenarios(w: Path) -> dict[str, tuple[list, list, list[tuple[Path, str]]]]:
    t = w / "targets"
    return {
        "analyze": (["analyze", w / "old_prof", "--out", t / "an", "-q"], ["analyze", w / "new_prof", "--out", t / "an", "-q"],
                    [(t / "an", "folder")]),
        "analyze --html --chrome-trace": (
            ["analyze", w / "old_prof", "--out", t / "an2", "--html", t / "r.html", "--chrome-trace", t / "c.json", "-q"],
            ["analyze", w / "new_prof", "--out", t / "an3", "--html", t / "r.html", "--chrome-trace", t / "c.json", "-q"],
            [(t / "r.html", "file"), (t / "c.json", "file")]),
        "logs parse": (["logs", "parse", w / "old_logs", "--out", t / "logs", "-q"],
                       ["logs", "parse", w / "new_logs", "--out", t / "logs", "-q"], [(t / "logs", "folder")]),
        "dump parse --npy": (["dump", "parse", w / "old_dump", "--out", t / "dp", "--npy", t / "npy", "-q"],
                             ["dump", "parse", w / "new_dump", "--out", t / "dp", "--npy", t / "npy", "-q"],
                             [(t / "dp", "folder"), (t / "npy", "folder")]),
        "dump compare": (["dump", "compare", w / "old_dump", w / "old_dump", "--out", t / "dc", "-q"],
                         ["dump", "compare", w / "new_dump", w / "new_golden", "--out", t / "dc", "-q", "--no-fail"],
                         [(t / "dc", "folder")]),
        "cluster": (["cluster", w / "old_cluster", "--out", t / "cl", "-q"], ["cluster", w / "new_cluster", "--out", t / "cl", "-q"],
                    [(t / "cl", "folder")]),
        "compare": (["compare", w / "old_prof", w / "old_prof", "--out", t / "cmp", "-q"],
                    ["compare", w / "new_prof", w / "old_prof", "--out", t / "cmp", "-q"], [(t / "cmp", "folder")]),
        "gate --update-baseline --junit": (
            ["gate", w / "old_prof", w / "old_prof", "--update-baseline", t / "base", "--junit", t / "j.xml", "-q"],
            ["gate", w / "new_prof", w / "new_prof", "--update-baseline", t / "base", "--junit", t / "j.xml", "-q"],
            [(t / "base", "folder"), (t / "j.xml", "file")]),
    }  # fmt: skip


SCENARIOS = list(_scenarios(Path("/")))


def _states(targets: list[tuple[Path, str]]) -> list:
    return [folder_state(p) if kind == "folder" else file_state(p) for p, kind in targets]


@pytest.mark.parametrize("name", SCENARIOS)
def test_kill_9_at_any_moment_leaves_the_old_or_the_new_output(ws: Path, tmp_path: Path, name: str) -> None:
    old, new, targets = _scenarios(ws)[name]
    (ws / "targets").mkdir(exist_ok=True)
    runner = ForkRunner(tmp_path)
    try:
        full = runner.run(new, ws)
        assert full.code in (0, 1) and not full.killed, full
        new_states = _states(targets)
        assert runner.run(old, ws).code in (0, 1)
        old_states = _states(targets)
        assert all(o != n for o, n in zip(old_states, new_states))
        rng = random.Random(sum(map(ord, name)))
        at_renames = sorted({1, 2, full.renames // 2, full.renames - 1, full.renames} - {0})
        kills = random_kills = 0
        for attempt in range(len(at_renames) + 80):
            if attempt < len(at_renames):
                how, when = "after renames", at_renames[attempt]
            elif random_kills < 20:
                how, when = "delay", rng.uniform(0.0, full.seconds)
            else:
                break
            ended = runner.run(new, ws, **({"delay": when} if how == "delay" else {"after_renames": when}))
            kills += ended.killed
            random_kills += ended.killed and how == "delay"
            now = _states(targets)
            for i, (path, _) in enumerate(targets):
                assert now[i] in (old_states[i], new_states[i]), f"{name}: {path} is neither the old nor the new output ({how} {when})"
            if now != old_states:  # some outputs are new: put the old ones back for the next kill
                assert runner.run(old, ws).code in (0, 1)
                assert _states(targets) == old_states
        assert random_kills >= 20 and kills >= 20 + len(at_renames) // 2, f"only {random_kills} runs were killed at random moments"
        # the next run finishes, and leaves nothing of the killed runs behind
        assert runner.run(new, ws).code in (0, 1)
        assert _states(targets) == new_states
        for path, _ in targets:
            left = _leftovers(path.parent, path.name)
            assert left == [], f"{name}: staging or lock of killed runs left beside {path}: {_describe(path.parent, left)}"
    finally:
        runner.close()


# -- a full disk ------------------------------------------------------------------------------------


def _can_mount(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {probe}"],
                       capture_output=True)  # fmt: skip
    return r.returncode == 0


FULL_DISK_SCRIPT = r"""
import json, os, subprocess, sys, pathlib
mnt = pathlib.Path(sys.argv[1]); size = sys.argv[2]; old = json.loads(sys.argv[3]); new = json.loads(sys.argv[4]); src = sys.argv[5]
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
os.chdir(mnt)
import hashlib
def state(p):
    p = mnt / p
    if p.is_dir():
        return sorted((q.relative_to(p).as_posix(), hashlib.sha256(q.read_bytes()).hexdigest()) for q in p.rglob("*") if q.is_file())
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
targets = json.loads(os.environ["TARGETS"])
first = subprocess.run([sys.executable, "-m", "npudiag", *old], capture_output=True, text=True)
before = {t: state(t) for t in targets}
with open(src, "w") as fh:  # tell the test what the old run did, then fill the disk to the last byte
    fh.write(json.dumps({"code": first.returncode, "stderr": first.stderr}))
fill = 0
try:
    with open(mnt / "filler", "wb") as fh:
        while True:
            fh.write(b"x" * 4096)
            fh.flush()
            fill += 4096
except OSError:
    pass
free = int(os.environ.get("FREE", "0"))
if free:
    os.truncate(mnt / "filler", max(0, fill - free))
second = subprocess.run([sys.executable, "-m", "npudiag", *new], capture_output=True, text=True)
print(json.dumps({"code": second.returncode, "stderr": second.stderr, "entries": sorted(os.listdir(mnt)),
                  "before": before, "after": {t: state(t) for t in targets}}))
"""


@pytest.mark.parametrize("name", ["analyze", "logs parse", "dump parse --npy", "cluster", "analyze --html --chrome-trace"])
@pytest.mark.parametrize("free", [0, 16 << 10])
def test_a_full_disk_keeps_the_old_output_and_says_so_in_one_line(ws: Path, tmp_path: Path, name: str, free: int) -> None:
    if not _can_mount(tmp_path):
        pytest.skip("cannot mount a small tmpfs here (needs root or user namespaces): the full-disk test needs one")
    old, new, targets = _scenarios(ws)[name]
    t = ws / "targets"
    rel = [p.relative_to(t).as_posix() for p, _ in targets]

    def local(argv: list) -> list[str]:  # the targets on the small file system, inputs where they are
        return [str(a).replace(str(t) + "/", "") if str(a).startswith(str(t)) else str(a) for a in argv]

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    report = tmp_path / "first.json"
    env = {**os.environ, "TARGETS": json.dumps(rel), "FREE": str(free), "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", FULL_DISK_SCRIPT, str(mnt), "8m",
                        json.dumps(local(old)), json.dumps(local(new)), str(report)], capture_output=True, text=True, env=env,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    first = json.loads(report.read_text())
    assert first["code"] in (0, 1), first["stderr"]
    got = json.loads(r.stdout)
    lines = [x for x in got["stderr"].splitlines() if not x.startswith("npudiag: warning") and "more warning" not in x]
    assert got["code"] == 2 and len(lines) == 1 and "No space left on device" in lines[0], got["stderr"]
    assert "Traceback" not in got["stderr"] and ".tmp-" not in lines[0]
    # nothing of the failed run is left: no staging folder, no lock, no temporary file
    assert [e for e in got["entries"] if e.startswith(".")] == [], got["entries"]
    for target in rel:
        assert got["before"][target] is not None, f"{target}: the old run wrote nothing ({first['stderr']})"
        assert got["after"][target] == got["before"][target], f"{target}: the old output was changed by the failed run"
