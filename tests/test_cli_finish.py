"""The CLI as a Unix tool: every command's output at 60-200 columns, the examples in --help run,
exit codes, --quiet / --verbose, warnings on stderr, and a startup without pandas / pyarrow / numpy."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from npudiag.report.text import line_spans
from npudiag.testing.generate import Variation, write_torch_profile
from npudiag.testing.workspace import DMESG, build_workspace

from .conftest import ROOT
from .helpers import STANDIN_BIN, msprof_standin_path, run_cli


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("ws"), ROOT / "fixtures")


def _env(ws: Path) -> dict[str, str]:
    env = msprof_standin_path(ws / "bin")
    env["PATH"] = f"{ws / 'pybin'}{os.pathsep}{STANDIN_BIN}{os.pathsep}{env['PATH']}"
    return {**env, "HOME": str(ws), "COLUMNS": "80"}


# -- the examples in --help --------------------------------------------------------------------

COMMANDS = ["analyze", "report", "compare", "gate", "cluster", "profile", "doctor", "logs parse", "logs export", "logs level",
            "dump", "dump check", "dump parse", "dump compare"]  # fmt: skip
EXPECTED_EXIT = {"doctor": {0, 1}, "dump compare": {1}}  # doctor: no CANN here; the example dump drifts from op 3 on


def _examples(command: str) -> list[str]:
    out = run_cli(*command.split(), "--help", env={"COLUMNS": "200"}).stdout
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.strip().startswith("Example"))
    return [x.strip() for x in lines[start + 1 :] if x.strip()]


@pytest.mark.slow
def test_every_command_shows_an_example_and_it_runs(ws: Path) -> None:
    env = _env(ws)
    ran = 0
    for command in COMMANDS:
        examples = _examples(command)
        assert examples, command
        for line in examples:
            stdin = None
            if "|" in line:  # `dmesg | npudiag logs parse -`: feed what dmesg prints
                line, stdin = line.split("|", 1)[1].strip(), DMESG
            argv = shlex.split(line)
            assert argv[0] == "npudiag" and " ".join(argv[1:]).startswith(command), line
            r = run_cli(*argv[1:], cwd=ws, env=env, input=stdin)
            assert r.returncode in EXPECTED_EXIT.get(command, {0}), (line, r.returncode, r.stderr[-2000:])
            assert "Traceback" not in r.stderr and "internal error" not in r.stderr, (line, r.stderr)
            ran += 1
    assert ran >= len(COMMANDS)


def test_root_help_lists_exit_codes() -> None:
    out = run_cli("--help", env={"COLUMNS": "80"}).stdout
    from npudiag.cli import EXIT_CODES

    for code, _ in EXIT_CODES:
        if code is not None:
            assert re.search(rf"^\s+{code}\s+\S", out, re.M), code
    readme = (ROOT / "README.md").read_text()
    for code in (0, 1, 2, 3, 130):
        assert re.search(rf"^\| `{code}` \|", readme, re.M), f"README exit-code table lacks {code}"


# -- every renderer at 60, 80, 120 and 200 columns ------------------------------------------------

RENDERERS = ("terminal", "cluster_report", "compare_report", "gate_report", "dump_report", "logs_report")


class _Recorder:
    def __init__(self) -> None:
        self.tables: list[dict[str, Any]] = []

    def wrap(self, real):
        def table(console, title, cols, rows, **kw):
            t = real(console, title, cols, rows, **kw)
            kept = [c.header for c in t.columns]
            widths = {c.header: c.width for c in t.columns}
            self.tables.append({"cols": cols, "rows": rows, "kept": kept, "title": str(title), "widths": widths})
            return t

        return table


def _main(argv: list[str], width: int, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str, _Recorder]:
    import importlib

    from npudiag import cli
    from npudiag.report import text

    rec = _Recorder()
    for name in RENDERERS:
        mod = importlib.import_module(f"npudiag.report.{name}")
        monkeypatch.setattr(mod, "table", rec.wrap(text.table))
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        cli.main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        monkeypatch.undo()
    return code, out.getvalue(), err.getvalue(), rec


def _plain(cell: Any) -> str:
    return getattr(cell, "plain", None) or ("" if cell is None else str(cell))


VIEWS = {
    "analyze": (["analyze", "fixtures/sample_msprof", "--out", "o/a"], {"op type", "time lost", "step", "rank"}),
    "analyze torch": (["analyze", "fixtures/sample_torch", "--out", "o/t", "--by", "name"], {"op name", "step"}),
    "cluster": (["cluster", "cluster_prof", "--out", "o/c"], {"rank"}),
    "compare": (["compare", "fixtures/sample_msprof", "fixtures/sample_torch", "--out", "o/cmp"], {"op", "delta"}),
    "gate": (["gate", "fixtures/sample_torch", "fixtures/sample_torch"], {"metric", "verdict"}),
    "dump parse": (["dump", "parse", "dump", "--out", "o/dp"], {"op", "tensor", "nan/inf"}),
    "dump compare": (["dump", "compare", "dump", "golden", "--out", "o/dc"], {"op", "tensor", "cosine", "pass"}),
    "logs parse": (["logs", "parse", "ascend/log", "--out", "o/l"], {"failure", "time", "message"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_views_fit_and_never_cut_a_number(view: str, width: int, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, keys = VIEWS[view]
    code, out, err, rec = _main(argv, width, ws, monkeypatch)
    assert code in (0, 1), (code, err)
    assert rec.tables, "no table was drawn"
    long = [x for x in out.splitlines() if len(x) > width]
    assert not long, long[:3]
    headers = set()
    for t in rec.tables:
        headers.update(t["kept"])
        for j, col in enumerate(t["cols"]):
            if col.priority == 0:  # key columns are always there
                assert col.header in t["kept"], (t["title"], col.header)
            if col.header not in t["kept"]:
                continue
            for row in t["rows"]:
                cell = _plain(row[j]) if j < len(row) else ""
                if not cell:
                    continue
                if col.kind in ("num", "fixed"):  # shown whole, on one line
                    assert cell in out, (t["title"], col.header, cell)
                elif col.kind == "name" and cell not in out:  # wrapped, never cut: every piece of it is there
                    w = t["widths"][col.header] or len(cell)
                    pieces = [cell[a:b] for a, b in line_spans(cell, w)]
                    assert "".join(pieces).replace(" ", "") == cell.replace(" ", "")  # the pieces are the whole name
                    assert all(p in out for p in pieces), (col.header, cell, pieces)
    assert keys <= headers, (keys - headers, headers)


def test_dump_parse_spells_out_nan(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err, _ = _main(["dump", "parse", "dump", "--out", "o/dp2"], 80, ws, monkeypatch)
    assert code == 0, err
    assert re.search(r"\bnan\b", out) and " na " not in out
    assert "conv1_l" in out and "Add_with_a_distinctive_end"[-6:] in out  # a long name is there whole (wrapped)
    assert "…" not in out


# -- exit codes, quiet, verbose, warnings ------------------------------------------------------------


def test_exit_codes(ws: Path, tmp_path: Path) -> None:
    env = _env(ws)
    s = "fixtures/sample_torch"
    cases = [
        (["analyze", s, "--out", str(tmp_path / "a")], 0),
        (["analyze", str(tmp_path / "missing")], 2),
        (["analyze", s, "--steps", "3:2"], 2),
        (["analyze", s, "--steps", "2:3", "--start-step", "1"], 2),
        (["analyze", s, "--time", "5s:1s"], 2),
        (["analyze", s, "--out", str(ws / "train.py" / "x")], 2),  # cannot write
        (["analyze", s, "--bogus"], 2),
        (["gate", s, s, "--steps", "2:"], 0),
        (["gate", "fixtures/sample_msprof", s], 2),  # whole run vs per-step: refused, not a regression
        (["dump", "compare", "dump", "golden", "--out", str(tmp_path / "d")], 1),
        (["dump", "compare", "dump", "golden", "--out", str(tmp_path / "d"), "--no-fail"], 0),
        (["dump", "compare", "golden", "golden", "--out", str(tmp_path / "d2")], 0),
        (["dump", "check", str(tmp_path / "none.json")], 2),
        (["logs", "parse", str(tmp_path / "missing")], 2),
        (["report", str(tmp_path / "a")], 0),
    ]
    for argv, want in cases:
        r = run_cli(*argv, cwd=ws, env=env)
        assert r.returncode == want, (argv, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr
        if want == 2:
            assert r.stderr.strip(), argv


@pytest.mark.slow
def test_a_gate_regression_exits_1_and_a_closed_pipe_exits_0(tmp_path: Path) -> None:
    base, cur = tmp_path / "base", tmp_path / "cur"
    for run in range(3):
        write_torch_profile(base / f"run{run}", kernels=400, seed=run, steps=6, copies=2,
                            variation=Variation(run, 0.005, {}), repeat_steps=True)  # fmt: skip
        write_torch_profile(cur / f"run{run}", kernels=400, seed=run, steps=6, copies=2,
                            variation=Variation(run, 0.005, {"MatMulV3": 1.5}), repeat_steps=True)  # fmt: skip
    r = run_cli("gate", base, cur, "--quiet")
    assert r.returncode == 1, r.stderr
    assert r.stdout == "" and "FAILED" in r.stderr and "MatMulV3" in r.stderr
    piped = subprocess.run(f"{shlex.quote(sys.executable)} -m npudiag gate {base} {cur} | head -1", shell=True,
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})  # fmt: skip
    assert piped.stderr == "" or "Broken pipe" not in piped.stderr
    pipe_status = subprocess.run(["bash", "-c", f"set -o pipefail; {shlex.quote(sys.executable)} -m npudiag analyze "
                                  f"{ROOT / 'fixtures' / 'sample_torch'} --out {tmp_path / 'p'} | head -1"],
                                 capture_output=True, text=True)  # fmt: skip
    assert pipe_status.returncode == 0, pipe_status.stderr


@pytest.mark.slow
@pytest.mark.parametrize("redirect", ["2>&1", "2>&1 >/dev/null", "-q 2>&1"])
def test_a_closed_pipe_on_either_stream_is_never_an_exit_code_of_its_own(tmp_path: Path, redirect: str) -> None:
    """`analyze X 2>&1 | head` exited 1 ("regression") when the cut fell before the last stderr line."""
    prof = ROOT / "fixtures" / "sample_msprof"  # it warns on stderr
    # the reader is gone before npudiag writes a byte: every write meets a closed pipe
    cmd = f"{shlex.quote(sys.executable)} -m npudiag analyze {prof} --out {tmp_path / 'o'} {redirect} | true"
    r = subprocess.run(["bash", "-c", f"{cmd}; echo ${{PIPESTATUS[0]}}"], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "0", r.stdout + r.stderr
    assert (tmp_path / "o" / "manifest.json").is_file()  # the work is done whoever reads the messages
    # a usage error keeps its own code when stderr is a closed pipe
    cmd = f"{shlex.quote(sys.executable)} -m npudiag analyze {prof} --steps 3:2 {redirect} | true"
    r = subprocess.run(["bash", "-c", f"{cmd}; echo ${{PIPESTATUS[0]}}"], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "2", r.stdout + r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", "fixtures/sample_msprof", "--out", "o/q1"],
        ["report", "o/q1"],
        ["compare", "fixtures/sample_msprof", "fixtures/sample_msprof", "--out", "o/q2"],
        ["gate", "fixtures/sample_torch", "fixtures/sample_torch"],
        ["cluster", "cluster_prof", "--out", "o/q3"],
        ["logs", "parse", "ascend/log", "--out", "o/q4"],
        ["dump", "parse", "dump", "--out", "o/q5"],
        ["dump", "compare", "golden", "golden", "--out", "o/q6"],
        ["dump", "check", "o/acl.json"],
        ["dump", "--layers", "conv1", "--acl-json", "o/acl.json"],
        ["profile", "--emit", "acl-json", "--acl-json", "o/acl2.json"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_quiet_prints_only_warnings_and_errors(argv: list[str], ws: Path) -> None:
    (ws / "o").mkdir(exist_ok=True)
    if argv[:2] == ["dump", "check"]:
        run_cli("dump", "--layers", "conv1", "--acl-json", ws / "o" / "acl.json", cwd=ws)
    if argv[0] == "report":
        run_cli("analyze", "fixtures/sample_msprof", "--out", "o/q1", "-q", cwd=ws)
    r = run_cli(*argv, "--quiet", cwd=ws, env=_env(ws))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert all(x.startswith("npudiag: warning: ") or x.startswith("npudiag: ... and ") for x in r.stderr.splitlines()), r.stderr


def test_warnings_go_to_stderr_first_five_and_a_count(ws: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", "fixtures/sample_msprof", "--out", tmp_path / "w", cwd=ws)
    assert "npudiag: warning: " in r.stderr and "text exports and a .db are both present" in r.stderr
    manifest = json.loads((tmp_path / "w" / "manifest.json").read_text())
    assert manifest["warnings"]
    v = run_cli("analyze", "fixtures/sample_msprof", "--out", tmp_path / "w", "-v", cwd=ws)
    assert "npudiag: read " in v.stderr and "(op_summary)" in v.stderr


def test_say_shows_five_warnings_then_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    from npudiag.cli._out import Say

    Say().warnings([f"w{i}" for i in range(12)], "manifest.json")
    lines = capsys.readouterr().err.splitlines()
    assert lines[:5] == [f"npudiag: warning: w{i}" for i in range(5)]
    assert lines[5] == "npudiag: ... and 7 more warning(s) in manifest.json (-v shows them all)" and len(lines) == 6
    Say(verbose=True).warnings([f"w{i}" for i in range(12)])
    assert len(capsys.readouterr().err.splitlines()) == 12
    Say(quiet=True).info("wrote x")
    Say(quiet=True).warnings(["\x1b[31mred"])
    assert capsys.readouterr().err == "npudiag: warning: \\x1b[31mred\n"


# -- startup -------------------------------------------------------------------------------------------

HEAVY = ("pandas", "pyarrow", "numpy")
_PROBE = """
import sys
from npudiag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules) + "\\n")
"""


@pytest.mark.parametrize(
    "argv,env",
    [
        (["--help"], {}),
        (["--version"], {}),
        (["analyze", "--help"], {}),
        (["dump", "--help"], {}),
        (["logs", "export", "--help"], {}),
        (["profile", "--help"], {}),
        ([], {"_NPUDIAG_COMPLETE": "complete_bash", "COMP_WORDS": "npudiag an", "COMP_CWORD": "1"}),
    ],
    ids=["help", "version", "analyze-help", "dump-help", "export-help", "profile-help", "completion"],
)
def test_startup_does_not_import_pandas_pyarrow_or_numpy(argv: list[str], env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                       env={**os.environ, **env})  # fmt: skip
    assert "HEAVY=\n" in r.stderr, r.stderr
    if env:
        assert "analyze" in r.stdout


def test_export_never_echoes_its_private_working_folder(ws: Path, tmp_path: Path) -> None:
    r = run_cli("logs", "export", "--out", tmp_path / "exp", cwd=tmp_path, env=_env(ws))
    assert r.returncode == 0, r.stderr
    assert ".msnpureport-" not in r.stdout + r.stderr
    assert "  " not in next(x for x in r.stderr.splitlines() if "running" in x).split("running", 1)[1].strip()


@pytest.mark.slow
def test_the_80_column_capture_in_docs_is_current() -> None:
    """docs/cli-80-columns.txt is what the commands print today (scripts/capture_cli.py rewrites it)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "capture_cli.py"), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    text = (ROOT / "docs" / "cli-80-columns.txt").read_text()
    assert all(len(x) <= 80 for x in text.splitlines() if not x.startswith(("$ ", "# ")))
    for command in ("analyze", "cluster", "compare", "gate", "dump compare", "logs parse"):
        assert f"$ npudiag {command} " in text


def test_256_ranks_fit_on_one_screen() -> None:
    """The rank matrix of 256 ranks x 100 steps: the slowest and fastest ranks and a count of the
    rest, one table, no per-step tables unless asked."""
    import pyarrow as pa
    from rich.console import Console

    from npudiag.profiling.analysis.cluster import rank_matrix
    from npudiag.report.cluster_report import render_cluster_terminal

    rng = np.random.default_rng(3)
    n = 256 * 100
    comp = rng.normal(9000, 50, n)
    comp[np.arange(n) // 100 == 77] *= 1.2  # rank 77 is slow
    steps = pa.table({
        "rank": np.repeat(np.arange(256), 100), "step": np.tile(np.arange(100), 256), "computing_us": comp,
        "communication_not_overlapped_us": rng.normal(500, 5, n), "free_us": rng.normal(300, 5, n), "bubble_us": np.zeros(n),
    })  # fmt: skip
    steps = steps.append_column("stage_us", pa.compute.add(steps["computing_us"], steps["free_us"]))
    summary = {"ranks": 256, "steps": 100, "rank_matrix": rank_matrix(steps), "per_step": [], "slow_ranks": []}
    console = Console(width=80, record=True, file=io.StringIO())
    render_cluster_terminal(summary, console)
    out = console.export_text()
    lines = out.splitlines()
    assert len(lines) <= 40, len(lines)
    assert "232 ranks between the 16 slowest and the 8 fastest" in " ".join(out.split())
    first_row = next(x for x in lines if re.match(r"\s+\d+\s", x))
    assert first_row.split()[0] == "77"  # slowest first
    assert all(len(x) <= 80 for x in lines)


@pytest.mark.slow
def test_ctrl_c_says_interrupted_and_leaves_the_old_output(tmp_path: Path) -> None:
    """Typer turned Ctrl-C into a silent exit 130: nothing on stderr said what happened."""
    import signal
    import time

    from npudiag.testing.generate import write_torch_profile

    gt = write_torch_profile(tmp_path / "p", kernels=200_000, steps=4, copies=0)
    out = tmp_path / "o"
    assert run_cli("analyze", tmp_path / "p", "--out", out, "-q").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    for delay in (0.5, 1.5):
        proc = subprocess.Popen([sys.executable, "-m", "npudiag", "analyze", gt.profile_dir, "--out", out, "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:  # it finished first: nothing to say
            continue
        assert proc.returncode == 130 and err.strip().splitlines()[-1] == "npudiag: interrupted", (proc.returncode, err)
        assert sorted(p.name for p in out.iterdir()) == before  # the old complete output


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_of_a_cluster_run_prints_no_worker_traceback(tmp_path: Path) -> None:
    """A terminal sends Ctrl-C to every process of the foreground group: the pool's workers printed a
    KeyboardInterrupt traceback after "npudiag: interrupted" (4 of 12 tries); they now leave the
    answer to npudiag (one line, exit 130) and die with it."""
    import os
    import signal
    import time

    from npudiag.testing.generate import write_torch_profile

    for rank in range(4):
        write_torch_profile(tmp_path / "c" / f"r{rank}", kernels=60_000, steps=4, copies=0, seed=rank, rank=rank)
    for delay in (0.8, 1.2, 1.6, 2.0, 2.4, 2.8):
        proc = subprocess.Popen([sys.executable, "-m", "npudiag", "cluster", tmp_path / "c", "--out", tmp_path / "o", "-q", "--force"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        assert proc.returncode in (0, 130), (delay, proc.returncode, err)
