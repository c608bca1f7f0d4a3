"""Throughput and memory of ``npudiag logs parse`` on a large generated log folder.

Writes N MB of plog / device-log files in the real line format (mostly INFO/DEBUG records of
several modules, some multi-line records, a few errors with codes), then runs
``npudiag logs parse`` in a fresh process and reports lines/s, MB/s and peak RSS.

    python bench/bench_logs.py --mb 2000
    python bench/bench_logs.py --real 200 --rounds 3 [--code OLD_CHECKOUT]

``--real MB``: one file of MB made of the corpus log folders' own lines, every file of
``$NPUDIAG_CORPUS/logs`` (plog, device logs, captured stdout with console and Python lines, register
dumps) repeated in its real proportions; the reference in the same run is a ten-line Python loop that
reads the file and splits each line's plog header (what the issue measured as 18-26x faster than
``logs parse``). Rounds are fresh processes, interleaved; the median ratio is printed. ``--code``
also runs an older checkout (PYTHONPATH) in the same rounds.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "logs"

TEMPLATES = [
    "[INFO] GE({pid},python3):{ts} [graph_manager.cc:{n}]{tid} RunGraph:Run graph {n} success, session id 0",
    "[DEBUG] RUNTIME({pid},python3):{ts} [stream.cc:{n}]{tid} AddTaskToStream:stream_id=2, task_id={n}, task_type=0",
    "[INFO] HCCL({pid},python3):{ts} [op_base.cc:{n}][{tid}][Entry-HcclAllReduce]tag[AllReduce_{n}], count[1048576], dataType[fp16]",
    "[DEBUG] PROFILING({pid},python3):{ts} [msprof_callback_impl.cpp:79] >>> (tid:{tid}) MsprofCtrlCallback called, type: 255",
    "[INFO] TDT({pid},python3):{ts} [process_mode_manager.cpp:{n}][OpenProcess][tid:{tid}] [TsdClient] deviceId[0] heartbeat",
    "[WARNING] DRV({pid},python3):{ts} [ascend][curpid: {pid}, {tid}][drv][devmm][devmm_ioctl {n}]<errno:0> retry",
]
ERRORS = [
    "[ERROR] RUNTIME({pid},python3):{ts} [stars_engine.cc:1551]{tid} ProcLogicCqReport:Task run failed, device_id=0, stream_id=2, "
    "task_id={n}, errType=0x20(sq sw status error)",
    "[ERROR] RUNTIME({pid},python3):{ts} [api_c.cc:{n}]{tid} rtStreamSynchronize:ErrCode=507014, desc=[aicore timeout]",
]


def _ts(i: int) -> str:
    s = i // 1000
    return f"2025-08-06-{(s // 3600) % 24:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{i % 1000:03d}.{(i * 7) % 1000:03d}"


def generate(total_mb: int, files: int = 8) -> Path:
    out = DATA / f"{total_mb}mb"
    if out.is_dir():
        return out
    rng = random.Random(0)
    per_file = total_mb * 1_000_000 // files
    for f in range(files):
        d = out / "debug" / "plog"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"plog-{1000 + f}_20250806230935{f:03d}.log"
        written, i = 0, 0
        with open(path, "w", encoding="utf-8") as fh:
            while written < per_file:
                lines = []
                for _ in range(1000):
                    i += 1
                    r = rng.random()
                    t = ERRORS[i % 2] if r < 0.0005 else TEMPLATES[i % len(TEMPLATES)]
                    lines.append(t.format(pid=1000 + f, tid=6200 + f, ts=_ts(i), n=i))
                    if r > 0.998:  # a multi-line record (a table HCCL prints)
                        lines.append("   |  dest_ip(rank_id)  |  src_ip(rank_id)   |   Role   |   Status   |")
                chunk = "\n".join(lines) + "\n"
                fh.write(chunk)
                written += len(chunk)
    return out


REFERENCE = """
import sys, time
t = time.perf_counter(); n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        if line.startswith("["):
            level, _, rest = line.partition("] ")
            module, _, rest = rest.partition("(")
            n += len(rest)
sys.stderr.write(f"TIME {time.perf_counter() - t:.3f}\\n")
"""


def real_mix(mb: int) -> Path:
    import os

    out = DATA / f"real-{mb}mb" / "mix.log"
    if out.is_file():
        return out
    corpus = Path(os.environ.get("NPUDIAG_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus")) / "logs"
    files = sorted(corpus.rglob("*.log"))
    if not files:
        sys.exit(f"no corpus logs under {corpus} (set NPUDIAG_CORPUS)")
    block = "".join(p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n" for p in files)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for _ in range(max(1, mb * 1_000_000 // len(block.encode()))):
            fh.write(block)
    return out


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    # run outside the checkout: ``python -c`` puts the working folder first on sys.path, before PYTHONPATH
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=DATA)
    stats = [x for x in r.stderr.splitlines() if x.startswith("TIME")]
    if not stats:
        sys.exit(r.stderr[-2000:])
    return float(stats[-1].split()[1])


def run_real(mb: int, rounds: int, code: str | None) -> None:
    import os
    import statistics

    path = real_mix(mb)
    size = path.stat().st_size

    def parse(out: Path) -> str:
        return ("import sys, time; from npudiag.cli import main; t = time.perf_counter(); sys.argv = ['npudiag', 'logs', 'parse', "
                f"'{path}', '--out', '{out}', '--quiet', '--force']\ncode = 0\ntry:\n    main()\nexcept SystemExit as e:\n"
                "    code = e.code or 0\nif code:\n    sys.exit(f'logs parse failed: exit {code}')\n"
                "sys.stderr.write(f'TIME {time.perf_counter() - t:.3f}\\n')")  # fmt: skip

    sides = {"this": None} | ({"old": {**os.environ, "PYTHONPATH": code}} if code else {})
    times: dict[str, list[float]] = {k: [] for k in (*sides, "reference")}
    for _ in range(rounds):
        times["reference"].append(_timed([sys.executable, "-c", REFERENCE, str(path)]))
        for name, env in sides.items():
            times[name].append(_timed([sys.executable, "-c", parse(DATA / f"parsed-real-{name}")], env))
    ref = statistics.median(times["reference"])
    if code:
        per_round = [t / o for t, o in zip(times["this"], times["old"])]
        print(f"this / old per round: {', '.join(f'{r:.2f}' for r in per_round)}; median {statistics.median(per_round):.2f}")
    for name in sides:
        med = statistics.median(times[name])
        ratios = [t / r for t, r in zip(times[name], times["reference"])]
        print(f"{name}: {size / 1e6:.0f} MB real mix in {med:.2f} s = {size / 1e6 / med:.1f} MB/s; "
              f"{statistics.median(ratios):.2f}x the header-split loop ({ref:.2f} s)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--real", type=int, default=None, help="MB of the corpus logs' own lines, in their real proportions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--code", default=None, help="an older checkout to time in the same rounds")
    a = ap.parse_args()
    if a.real is not None:
        run_real(a.real, a.rounds, a.code)
        return
    folder = generate(a.mb)
    size = sum(p.stat().st_size for p in folder.rglob("*.log"))
    lines = 0
    for p in folder.rglob("*.log"):
        with open(p, "rb") as fh:
            lines += sum(1 for _ in fh)
    out = DATA / "parsed"
    code = (
        "import resource, sys, time; from npudiag.cli import main; t=time.perf_counter(); sys.argv=['npudiag','logs','parse',"
        f"'{folder}','--out','{out}','--json'];\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(f'TIME {time.perf_counter()-t:.2f} RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f}\\n')"
    )
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    stats = [x for x in r.stderr.splitlines() if x.startswith("TIME")]
    if not stats:
        sys.exit(r.stderr)
    _, secs, _, rss = stats[-1].split()
    secs_f = float(secs)
    print(
        f"{size / 1e6:.0f} MB, {lines:,} lines in {secs_f:.1f} s ({wall:.1f} s with start-up): "
        f"{lines / secs_f:,.0f} lines/s, {size / 1e6 / secs_f:.1f} MB/s, peak RSS {rss} MB"
    )


if __name__ == "__main__":
    main()
