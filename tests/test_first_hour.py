"""A new user's first hour: each edge found trying npudiag on a fresh clone with the corpus and the
bundled samples, with the expectation recounted from the raw files where there is a number."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import CORPUS, CORPUS_ROOT, ROOT
from .helpers import run_cli

MINDINSIGHT = CORPUS / "mindinsight-prof-device0-2023"
DB_RANKS = CORPUS / "msinsight-pytorch-db-rank1"
SAMPLE = ROOT / "fixtures" / "sample_torch"


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"corpus not present at {path} (set NPUDIAG_CORPUS)")


def test_the_header_counts_the_steps_analysed_and_says_how_many_were_recorded(tmp_path: Path) -> None:
    """MindInsight's CANN 6 profile: the header said "steps 10" over a step table of 3 rows. Its
    step_trace files record 10 iterations; its timelines hold the device tasks of 3."""
    _need(MINDINSIGHT)
    timeline = next(MINDINSIGHT.rglob("timeline"))
    recorded = {e["args"]["Iteration ID"] for f in timeline.glob("step_trace_*.json") for e in json.loads(f.read_text())
                if e.get("cat") == "Iteration Time"}  # fmt: skip
    with_tasks = {int(f.stem.rsplit("_", 1)[1]) for f in timeline.glob("task_time_*.json")}
    r = run_cli("analyze", MINDINSIGHT, "--out", tmp_path / "o", env={"COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    assert f"steps {len(with_tasks)} ({len(recorded)} recorded)" in r.stdout, r.stdout[:400]
    rows = re.findall(r"^\s+0\s+(\d+)\s+\d", r.stdout.split("Step breakdown")[1], re.M)
    assert {int(x) for x in rows} == with_tasks


def test_skip_reasons_and_advice_fit_the_input(tmp_path: Path) -> None:
    """A .db told "torch_npu's trace_view has no size(B)"; a profile with CANN calls told "a higher
    profiler level records CANN calls"; every profile got the same made-up op-name examples."""
    _need(DB_RANKS)
    level1 = DB_RANKS / "level1"
    s = json.loads(run_cli("analyze", level1, "--out", tmp_path / "o", "--json").stdout)
    why = s["rules_skipped"]["small_copies"]
    assert "trace_view" not in why and "the .db's copy tasks" in why
    assert s["profile"]["api_calls"] > 0 and "profiler_level" not in (s["idle_causes"].get("advice") or "")
    level0 = CORPUS / "msinsight-pytorch-text-2025" / "level0"
    r = run_cli("analyze", level0, "--out", tmp_path / "o0", "--json")
    (warning,) = [w for w in json.loads(r.stdout)["warnings"] if "record no op type" in w]
    names = set()
    import csv

    for row in csv.DictReader(next(level0.rglob("kernel_details.csv")).open()):
        names.add(row["Name"])
    shown = re.findall(r"(\S+) -> (\S+?)[,)]", warning.split("(here: ")[1])
    assert shown and all(name in names for name, _ in shown), shown  # this profile's own names


def test_slips_of_the_first_hour(tmp_path: Path) -> None:
    help_text = run_cli("--help", env={"COLUMNS": "100"}).stdout
    assert "dump compare finding failing tensors" in " ".join(help_text.split())  # was "dump compare, check failing tensors"
    dc = " ".join(run_cli("dump", "compare", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "stats_compare.parquet" in dc and "compare_result_<time>.csv" in dc
    assert "--quiet" in run_cli("sql", "--help").stdout
    assert "--json" not in run_cli("profile", "--help", env={"COLUMNS": "200"}).stdout.split("--quiet")[1].split("\n  -")[0]
    mem = run_cli("profile", "--memory", "--mode", "acl-json", "--dry-run", "--", "python", "x.py")
    assert mem.returncode == 2 and "--memory (it turns on" in mem.stderr, mem.stderr
    proc = run_cli("analyze", SAMPLE, "--out", "/proc/npudiag-nope")
    assert proc.returncode == 2 and ".lock" not in proc.stderr and "/proc/npudiag-nope" in proc.stderr, proc.stderr
    other = CORPUS / "mstt-cluster-analysis-output"
    if other.is_dir():
        r = run_cli("cluster", other, "--out", tmp_path / "c")
        assert r.returncode == 2 and "msprof-analyze's cluster_analysis_output" in r.stderr, r.stderr


def test_sql_quiet_prints_no_table_and_keeps_the_exit_code(tmp_path: Path) -> None:
    assert run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "-q").returncode == 0
    ok = run_cli("sql", tmp_path / "o", "SELECT count(*) FROM kernels", "-q")
    assert ok.returncode == 0 and ok.stdout == ""
    bad = run_cli("sql", tmp_path / "o", "SELECT nope FROM kernels", "-q")
    assert bad.returncode == 2 and bad.stderr.strip()


def test_old_warnings_of_an_out_folder_are_not_repeated(tmp_path: Path) -> None:
    """gate --quiet, report and compare re-printed the baseline's "kernel(s) record no op type" on every
    CI run: said when the analysis ran, again with -v only."""
    level0 = CORPUS / "msinsight-pytorch-text-2025" / "level0"
    _need(level0)
    first = run_cli("analyze", level0, "--out", tmp_path / "o", "-q")
    assert "record no op type" in first.stderr
    for argv in (("gate", tmp_path / "o", tmp_path / "o", "-q"), ("report", tmp_path / "o"),
                 ("compare", tmp_path / "o", tmp_path / "o")):  # fmt: skip
        r = run_cli(*argv)
        assert r.returncode == 0 and "record no op type" not in r.stderr, (argv, r.stderr)
    assert "record no op type" in run_cli("report", tmp_path / "o", "-v").stderr


def test_dump_compare_of_mindspore_against_pytorch_knows_equal_dtypes(tmp_path: Path) -> None:
    """ "dtype differs (BFloat16 vs torch.bfloat16)": the frameworks name one dtype two ways. Recount
    from both dump.json files: the pairs whose dtypes are one name, case and framework prefix aside."""
    root = CORPUS_ROOT / "adump" / "samples" / "msprobe-ut-compare-dumpfile"
    _need(root)
    r = run_cli("dump", "compare", root / "mindspore_data", root / "pytorch_data", "--out", tmp_path / "o", "--json", "--no-fail")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "o" / "stats_compare.parquet").to_pylist()
    same = [x for x in rows if x["dtype"] and x["golden_dtype"] and x["dtype"].lower() == x["golden_dtype"].lower().removeprefix("torch.")]
    assert same and not any("dtype differs" in (x["fail_reason"] or "") for x in same)
    # a tensor that fails says why, whatever its statistics
    assert all(x["fail_reason"] for x in rows if x["passed"] is False)
    text = run_cli("dump", "compare", root / "mindspore_data", root / "pytorch_data", "--out", tmp_path / "o", "--force",
                   "--no-fail", env={"COLUMNS": "120"}).stdout  # fmt: skip
    assert " why" in text and doc["tensors_compared"] == len(rows)


@pytest.mark.slow
@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_real_names_wrap_at_their_boundaries(tmp_path: Path, width: int) -> None:
    """At 80 columns real names broke mid-word ("AI_VECTOR_C/ORE", "MaxPoolGradWithArgma/xV1") and the
    .db's hot-ops table took 33 lines for 20 ops: task types are abbreviated with a legend where the
    terminal is narrow, and a name wraps after `_` `/` `.` or between CamelCase words."""
    _need(DB_RANKS)
    import pyarrow.compute as pc

    from npudiag.profiling.ingest import ingest

    r = run_cli("analyze", DB_RANKS, "--out", tmp_path / "o", env={"COLUMNS": str(width)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(x) <= width for x in lines)
    hot = r.stdout.split("Hot operators")[1].split("Memory copies")[0].split("Operator efficiency")[0].splitlines()
    assert len(hot) <= 20 + 8, len(hot)  # a line per op (20 shown) but a few, the title, the header, the legend (33 before)
    kernels = ingest([DB_RANKS]).tables["kernels"]
    names = set(pc.unique(kernels["op_type"]).drop_null().to_pylist()) | set(pc.unique(kernels["task_type"]).drop_null().to_pylist())
    text = "\n".join(hot)
    for name in names:
        for cut in range(2, len(name) - 1):  # a line never ends inside a word where a boundary was at hand
            a, b = name[:cut], name[cut:]
            if f"{a}\n" in text.replace(" \n", "\n") and b in text and name not in text:
                assert a[-1] in "_/.:,-" or (a[-1].islower() and b[0].isupper()), (name, a, b)
