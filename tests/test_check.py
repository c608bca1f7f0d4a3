"""``npudiag check``: what each profile holds and lacks, recomputed here from the raw files with the
json, csv and sqlite3 modules; planted problems found, clean twins pass, exit codes 0 / 1 / 2."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from npudiag.profiling import health, msprof_switches, releases
from npudiag.testing.generate import write_torch_profile

from .helpers import run_cli

FOUR = "msinsight-st-cann83rc1-level2-4rank"
LEVEL0 = "msinsight-pytorch-text-2025/level0"
DB2 = "msinsight-pytorch-db-rank1/level2"


def _json(r) -> dict:
    return json.loads(r.stdout)


def _status(doc: dict, rank: int) -> dict[str, dict]:
    (p,) = [p for p in doc["profiles"] if p["rank"] == rank]
    return {d["data"]: d for d in p["data"]}


def _config(folder: Path) -> tuple[dict, dict]:
    (info,) = folder.glob("profiler_info*.json")
    cfg = json.loads(info.read_text())["config"]
    return cfg["common_config"], cfg["experimental_config"]


def test_four_rank_corpus_run_names_what_each_rank_lacks(corpus: Path) -> None:
    r = run_cli("check", corpus / FOUR, "--json")
    assert r.returncode == 1, r.stderr
    doc = _json(r)
    for rank in range(4):
        folder = corpus / FOUR / f"rank_{rank}_ascend_pt"
        out = folder / "ASCEND_PROFILER_OUTPUT"
        common, exp = _config(folder)
        files = {f.name for f in out.iterdir()}
        st = _status(doc, rank)
        # kernels: kernel_details.csv holds them; op_statistic.csv alone is totals per type
        want = "present" if "kernel_details.csv" in files else "partial" if "op_statistic.csv" in files else "missing"
        assert st["kernels"]["status"] == want, (rank, st["kernels"])
        assert "ProfilerActivity.NPU" in common["activities"]
        want_mem = "present" if files & {"memory_record.csv", "operator_memory.csv", "npu_module_mem.csv"} else "missing"
        assert common["profile_memory"] is True and st["memory"]["status"] == want_mem
        assert st["communication"]["status"] == "present" and "communication.json" in files
        # AI Core metrics: the PMU columns --aic-metrics adds to kernel_details.csv
        if "kernel_details.csv" in files:
            with open(out / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
                header = next(csv.reader(fh))
            assert exp["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION" and any(c.startswith("aic_") for c in header)
            assert st["aicore_metrics"]["status"] == "present"
        else:
            assert st["aicore_metrics"]["status"] == "missing"
        # no trace_view.json in this set: framework ops asked for (CPU activity) and absent
        assert "trace_view.json" not in files and st["framework_ops"]["status"] == "missing"
        p = next(p for p in doc["profiles"] if p["rank"] == rank)
        assert p["versions"] == {"torch_npu": "2.7.1", "cann": "8.3.RC1"} and p["world_size"] == 4
    assert not doc["collection_problems"]  # all four ranks of world size 4, one version


def test_a_rank_missing_from_the_world_size_is_named(corpus: Path, tmp_path: Path) -> None:
    job = tmp_path / "job"
    for rank in (0, 1, 3):
        src = corpus / FOUR / f"rank_{rank}_ascend_pt"
        shutil.copytree(src, job / src.name, ignore=shutil.ignore_patterns("*.csv"))
    world = json.loads((corpus / FOUR / "rank_0_ascend_pt" / "profiler_metadata.json").read_text())["distributed_args"]["world_size"]
    r = run_cli("check", job, "--json")
    assert r.returncode == 1
    (line,) = _json(r)["collection_problems"]
    assert f"world size {world}, 3 ranks found: rank(s) 2 missing" in line


def test_level0_trace_counts_equal_a_recount_with_json(corpus: Path) -> None:
    folder = corpus / LEVEL0 / "rank0_ascend_pt"
    r = run_cli("check", folder, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    st = _status(_json(r), 0)
    events = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        kernel_rows = sum(1 for _ in csv.DictReader(fh))
    cpu_ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    # kernels as analyze reads them: kernel_details.csv's rows (the trace's device tasks add the copies)
    assert st["kernels"]["rows"] == kernel_rows == 191 and "kernel_details.csv" in st["kernels"]["found_in"]
    assert st["framework_ops"]["rows"] == cpu_ops > 0
    modules = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "python_function" and e["name"].startswith("nn.Module: "))
    assert st["modules"]["rows"] == modules == 26 and st["modules"]["status"] == "present"
    flows: dict[tuple, set] = {}
    for e in events:
        if e.get("ph") in ("s", "f") and e.get("cat") in ("async_npu", "HostToDevice"):
            flows.setdefault((e["cat"], json.dumps(e.get("id"))), set()).add(e["ph"])
    ends = sum(1 for e in events if e.get("ph") == "f" and e.get("cat") in ("async_npu", "HostToDevice"))
    resolved = sum(1 for v in flows.values() if v == {"s", "f"})
    # flows: the device tasks tied to the op that launched them (at most one per flow end)
    assert 0 < st["flows"]["rows"] <= ends and f"{resolved:,} of {len(flows):,} flow ids have both ends" in st["flows"]["note"]
    steps = sum(1 for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    assert st["steps"]["rows"] == steps and st["steps"]["status"] == "present"
    # Level0 records no CANN API (from Level1 on): not asked for, so not a problem
    common, exp = _config(folder)
    assert exp["_profiler_level"] == "Level0" and st["host_api"]["status"] == "not collected"
    assert st["host_api"]["note"] == next(d for d in health.DATA if d.name == "host_api").torch_switch


def test_db_counts_equal_sqlite_counts(corpus: Path) -> None:
    folder = corpus / DB2 / "rank1_ascend_pt"
    r = run_cli("check", folder, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    st = _status(_json(r), 1)
    db = folder / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"
    con = sqlite3.connect(db)
    tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    n = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    con.close()
    con = sqlite3.connect(db)
    q = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    # every count is analyze's: compute kernels are the TASK rows COMPUTE_TASK_INFO details, plus the collectives
    kernels = q("SELECT count(*) FROM TASK WHERE globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)") + n["COMMUNICATION_OP"]
    assert st["kernels"]["rows"] == kernels == 191
    assert st["memory"]["rows"] == n["MEMORY_RECORD"] + n["NPU_MODULE_MEM"] + n["NPU_MEM"]
    op_type = q("SELECT id FROM ENUM_API_TYPE WHERE name = 'op'")
    assert st["host_api"]["rows"] == n["CANN_API"]
    assert st["framework_ops"]["rows"] == q(f"SELECT count(*) FROM PYTORCH_API WHERE type = {op_type}")
    assert 0 < st["flows"]["rows"] <= n["CONNECTION_IDS"]
    # AI Core metrics: the compute kernels TASK_PMU_INFO gives metrics for (28 per task in this export)
    pmu = q("SELECT count(*) FROM TASK WHERE globalTaskId IN (SELECT globalTaskId FROM TASK_PMU_INFO) "
            "AND globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)")  # fmt: skip
    assert st["aicore_metrics"]["rows"] == pmu == n["TASK_PMU_INFO"] // 28 == 185
    assert st["frequency"]["rows"] == n["AICORE_FREQ"]
    con.close()
    con = sqlite3.connect(db)
    (modules,) = con.execute("SELECT count(*) FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
                             "WHERE s.value LIKE 'nn.Module: %'").fetchone()  # fmt: skip
    con.close()
    assert st["modules"]["rows"] == modules > 0


def test_planted_lacks_are_problems_and_the_clean_twin_is_healthy(tmp_path: Path) -> None:
    clean, planted = tmp_path / "clean", tmp_path / "planted"
    for root in (clean, planted):
        write_torch_profile(root, kernels=300, steps=2, copies=4)
    r = run_cli("check", clean)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "healthy" in r.stdout
    (pt,) = planted.glob("*_ascend_pt")
    info = next(pt.glob("profiler_info_*.json"))
    doc = json.loads(info.read_text())
    doc["config"]["common_config"]["profile_memory"] = True  # asked for memory, and none was written
    info.write_text(json.dumps(doc))
    (pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()  # op_statistic.csv stays: totals only
    r = run_cli("check", planted, "--json")
    assert r.returncode == 1
    st = _status(_json(r), 0)
    assert st["memory"]["status"] == "missing" and "profile_memory=True" in st["memory"]["note"]
    assert st["kernels"]["status"] in ("present", "partial")  # the trace still holds the device tasks
    problems = _json(r)["problems"]
    assert any("no memory records, though profile_memory=True" in p for p in problems)
    # the Markdown view (a CI job summary): what --markdown writes is what --format markdown prints, with the
    # same verdict and exit code; the clean twin's kernels row is its kernel_details.csv's rows, read with csv
    md = run_cli("check", planted, "--format", "markdown", "--markdown", tmp_path / "c.md")
    assert md.returncode == 1 and md.stdout == (tmp_path / "c.md").read_text(encoding="utf-8")
    assert md.stdout.startswith("## ❌ npudiag check — ") and "| memory | missing |" in md.stdout
    assert "- **problem:** no memory records, though profile\\_memory=True" in md.stdout
    ok = run_cli("check", clean, "--format", "markdown")
    (kd,) = clean.rglob("kernel_details.csv")
    with open(kd, newline="", encoding="utf-8") as fh:
        kernels = sum(1 for _ in csv.DictReader(fh))
    assert ok.returncode == 0 and ok.stdout.startswith("## ✅ npudiag check — healthy")
    assert f"| kernels | present | {kernels:,} |" in ok.stdout


def test_flows_that_never_resolve_are_a_problem(corpus: Path, tmp_path: Path) -> None:
    src = corpus / LEVEL0 / "rank0_ascend_pt"
    folder = tmp_path / src.name
    shutil.copytree(src, folder)
    trace = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.chmod(0o644)
    events = json.loads(trace.read_text())
    ends = [e for e in events if e.get("ph") == "f" and e.get("cat") in ("async_npu", "HostToDevice")]
    assert ends  # the real trace has them, all matched (test above)
    trace.write_text(json.dumps([e for e in events if not (e.get("ph") == "f" and e.get("cat") in ("async_npu", "HostToDevice"))]))
    r = run_cli("check", folder, "--json")
    assert r.returncode == 1
    st = _status(_json(r), 0)
    starts = {(e["cat"], e["id"]) for e in events if e.get("ph") == "s" and e.get("cat") in ("async_npu", "HostToDevice")}
    assert st["flows"]["status"] == "partial" and f"0 of {len(starts):,} flow ids have both ends" in st["flows"]["note"]
    assert any("host-to-device flows resolves" in p for p in _json(r)["problems"])


def test_unreadable_inputs(tmp_path: Path) -> None:
    r = run_cli("check", tmp_path / "nothing-here")
    assert r.returncode == 2 and "no such file or folder" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = run_cli("check", tmp_path / "empty")
    assert r.returncode == 2 and "no profile found" in r.stderr
    # a broken trace in a profile: a problem naming the file, the other files still checked
    write_torch_profile(tmp_path / "p", kernels=100, steps=1, copies=0)
    (trace,) = (tmp_path / "p").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
    trace.write_bytes(trace.read_bytes()[: trace.stat().st_size // 2])
    r = run_cli("check", tmp_path / "p", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    doc = _json(r)
    assert any(p.count("trace_view.json") == 1 and "expected" in p for p in doc["problems"])
    assert _status(doc, 0)["steps"]["status"] == "present"  # step_trace_time.csv still read


@pytest.mark.parametrize("columns", ["60", "80", "200"])
def test_report_fits_the_terminal(corpus: Path, columns: str) -> None:
    r = run_cli("check", corpus / FOUR / "rank_0_ascend_pt", corpus / DB2, env={"COLUMNS": columns})
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= int(columns)
    body = "\n".join(lines)
    for word in ("kernels", "framework_ops", "aicore_metrics", "missing", "present", "185"):
        assert word in body, word
    assert "problem" in body


def test_every_msprof_switch_named_is_in_the_switch_table() -> None:
    import re

    known = set(msprof_switches.SWITCHES)
    for d in health.DATA:
        for name in re.findall(r"--([a-z][a-z0-9-]+)", d.msprof_switch):
            assert name in known, (d.name, name)


def test_the_object_form_counts_as_the_array_form(corpus: Path, tmp_path: Path) -> None:
    src = corpus / LEVEL0 / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    (tmp_path / "a").mkdir()
    (tmp_path / "o").mkdir()
    (tmp_path / "a" / "trace_view.json").write_bytes(src.read_bytes())
    (tmp_path / "o" / "trace_view.json").write_text(json.dumps({"traceEvents": json.loads(src.read_text()), "displayTimeUnit": "ms"}))
    a, o = (_json(run_cli("check", tmp_path / d, "--json")) for d in ("a", "o"))
    assert [(d["data"], d["status"], d["rows"], d["note"]) for d in a["profiles"][0]["data"]] == [
        (d["data"], d["status"], d["rows"], d["note"]) for d in o["profiles"][0]["data"]
    ]


@pytest.mark.parametrize(
    "body",
    [
        b'[{"ph": "X", "name": "k\xff\xfe", "pid": 1, "tid": 1, "ts": "1.000", "dur": 1}]',  # not UTF-8
        b'[{"ph": "X", "name": "k", "pid": 1, ',  # cut off
    ],
)
def test_a_hostile_trace_is_one_problem_naming_the_file(tmp_path: Path, body: bytes) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "trace_view.json").write_bytes(body)
    r = run_cli("check", tmp_path / "p", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (problem,) = _json(r)["problems"]
    assert problem.count("trace_view.json") == 1 and ("offset" in problem or "expected" in problem) and len(problem) < 400


def test_a_torch_npu_and_cann_not_released_together_are_named(tmp_path: Path) -> None:
    """profiler_info's versions against Ascend/pytorch's table: the pair the generator writes (torch_npu
    2.7.1, CANN 8.3.RC1, as the corpus 4-rank run) passes silently; the same torch_npu with CANN 8.2.RC1
    is a note naming the release it was built for, and the profile stays healthy (exit 0)."""
    write_torch_profile(tmp_path, kernels=50, steps=2)
    (pt,) = tmp_path.glob("*_ascend_pt")
    info = next(pt.glob("profiler_info_*.json"))
    doc = json.loads(info.read_text())
    assert (doc["torch_npu_version"], doc["cann_version"]) == ("2.7.1", "8.3.RC1")
    r = run_cli("check", tmp_path, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not any("released" in n for p in _json(r)["profiles"] for n in p["notes"])
    doc["cann_version"] = "8.2.RC1"
    info.write_text(json.dumps(doc))
    r = run_cli("check", tmp_path, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (p,) = _json(r)["profiles"]
    (note,) = [n for n in p["notes"] if "released" in n]
    assert "torch_npu 2.7.1 was released for CANN 8.3.RC1" in note and "CANN 8.2.RC1" in note
    shown = run_cli("check", tmp_path, env={"COLUMNS": "80"})
    assert "8.3.RC1" in shown.stdout and shown.returncode == 0


@pytest.mark.parametrize(
    ("torch_npu", "cann", "named"),
    [
        ("2.1.0.post6", "8.0.RC2", False),
        ("2.1.0.post6", "8.0.rc2", False),  # case
        ("2.6.0.post5", "8.5.0.alpha001", False),  # a community build of the release
        ("2.7.1+gitabc123", "8.3.RC1", False),  # a local build suffix
        ("1.11.0.post3", "6.3.RC3.1", False),
        ("1.11.0.post2", "6.3.RC3.1", True),  # 6.3.RC3.1 is its own release, not a build of 6.3.RC3
        ("2.1.0.post6", "8.0.RC1", True),
        ("2.9.0", "9.1.0", True),
        ("3.0.0", "9.9.9", False),  # not in the table: not judged
    ],
)
def test_release_pairs(torch_npu: str, cann: str, named: bool) -> None:
    assert (releases.mismatch(torch_npu, cann) is not None) is named
