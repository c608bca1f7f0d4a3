"""compare and gate on generated runs of one workload: noise passes, real regressions fail and are named."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from npudiag import schemas
from npudiag.profiling.analysis.gate import GateConfig, judge, parse_percent
from npudiag.profiling.runs import load_side, run_folders
from npudiag.testing.generate import Variation, write_torch_profile

from .helpers import run_cli

SEED = 11  # the workload: one op sequence; each run varies only by noise (and planted changes)
STEPS = 10
KERNELS = 2000


def _run(root: Path, name: str, noise_seed: int, steps: int = STEPS, **scale: float) -> Path:
    write_torch_profile(
        root / name, kernels=KERNELS, seed=SEED, steps=steps, copies=4, variation=Variation(noise_seed, 0.03, scale), repeat_steps=True
    )
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")
    base = _run(root, "base", 1)
    truth = json.loads((base / "ground_truth.json").read_text())["by_type"]
    # (c): Add +30 % while MatMulV3 gives back exactly that time, so the total stays put
    matmul = 1.0 - 0.3 * truth["Add"]["total_us"] / truth["MatMulV3"]["total_us"]
    return {
        "base": base,
        "same": _run(root, "same", 2),
        "slow_add": _run(root, "slow_add", 2, Add=1.15),
        "shifted": _run(root, "shifted", 3, Add=1.30, MatMulV3=matmul),
        "short_base": _run(root, "short_base", 4, steps=4),
        "short_slow": _run(root, "short_slow", 5, steps=4, Add=1.30),
    }


def _gate(a: Path, b: Path, cfg: GateConfig | None = None):
    return judge([r.tables for r in load_side(a)], [r.tables for r in load_side(b)], cfg)


def _verdict(result, metric: str):
    return next(v for v in result.verdicts if v.metric == metric)


def test_noise_only_runs_pass(runs: dict[str, Path]) -> None:
    result = _gate(runs["base"], runs["same"])
    assert not result.failed, [(v.metric, v.reason) for v in result.verdicts if v.failed]
    assert result.warnings == []
    step = _verdict(result, "step_time_us")
    assert step.base_n == STEPS and step.cur_n == STEPS and step.method == "mann-whitney (exact)"


def test_one_op_15_percent_slower_fails_and_is_named(runs: dict[str, Path]) -> None:
    result = _gate(runs["base"], runs["slow_add"])
    assert [v.metric for v in result.verdicts if v.failed] == ["op:Add"]
    add = _verdict(result, "op:Add")
    assert 1.10 < add.ratio < 1.20 and add.p_value < 0.002
    assert not _verdict(result, "step_time_us").failed  # Add is ~9 % of the step: +1.4 % in total


def test_per_op_gate_catches_a_regression_hidden_in_an_unchanged_total(runs: dict[str, Path]) -> None:
    result = _gate(runs["base"], runs["shifted"])
    step = _verdict(result, "step_time_us")
    assert step.status == "pass" and abs(step.ratio - 1.0) < 0.05  # only noise moves the total
    assert _verdict(result, "op:Add").failed
    assert _verdict(result, "op:MatMulV3").status in ("improvement", "pass")
    assert [v.metric for v in result.verdicts if v.failed] == ["op:Add"]


def test_too_few_steps_fall_back_to_the_threshold_with_a_warning(runs: dict[str, Path]) -> None:
    result = _gate(runs["short_base"], runs["short_slow"])
    assert len(result.warnings) == 1 and "threshold alone" in result.warnings[0] and "4 baseline and 4 current" in result.warnings[0]
    add = _verdict(result, "op:Add")
    assert add.failed and add.method == "threshold-only" and add.p_value is None


def test_per_metric_limit_from_the_toml_file(runs: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "npudiag-gate.toml").write_text('[gate]\nmax_regression = "5%"\n\n[metric."op:Add"]\nmax_regression = "20%"\n')
    r = run_cli("gate", runs["base"], runs["slow_add"], "--quiet", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["passed"] and next(m for m in data["metrics"] if m["metric"] == "op:Add")["max_regression"] == 0.2
    (tmp_path / "npudiag-gate.toml").write_text("[gate]\nmax_regresion = 5\n")
    r = run_cli("gate", runs["base"], runs["slow_add"], cwd=tmp_path)
    assert r.returncode == 2 and "max_regresion" in r.stderr and "Traceback" not in r.stderr


def test_cli_exit_codes_junit_and_markdown(runs: dict[str, Path], tmp_path: Path) -> None:
    ok = run_cli("gate", runs["base"], runs["same"], "--quiet")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout == "" and "op:" not in ok.stderr  # --quiet: a passing gate prints nothing
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    bad = run_cli("gate", runs["base"], runs["slow_add"], "--junit", junit, "--markdown", md, "--quiet")
    assert bad.returncode == 1 and bad.stdout == "" and "op:Add" in bad.stderr  # only what failed, on stderr
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("tests")) == len(cases) >= 12 and int(suite.get("failures")) == len(failed) == 1
    assert failed[0].get("name") == "op:Add" and "p=" in failed[0].find("failure").text
    assert suite.get("errors") == "0" and root.get("failures") == "1"
    text = md.read_text()
    assert text.startswith("## ❌ npudiag gate FAILED") and "| op:Add |" in text and "**REGRESSION**" in text
    missing = run_cli("gate", tmp_path / "nope", runs["same"])
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli("gate", tmp_path / "empty", runs["same"])
    assert empty.returncode == 2 and "empty" in empty.stderr


@pytest.mark.slow
def test_repeated_runs_folder_is_one_side_of_pooled_samples(tmp_path: Path) -> None:
    for i in range(3):
        _run(tmp_path / "base", f"run{i}", 10 + i, steps=3)
        _run(tmp_path / "cur", f"run{i}", 20 + i, steps=3, Add=1.3)
    assert [p.name for p in run_folders(tmp_path / "base")] == ["run0", "run1", "run2"]
    result = _gate(tmp_path / "base", tmp_path / "cur")
    add = _verdict(result, "op:Add")
    assert add.base_n == 9 and add.cur_n == 9 and add.method.startswith("mann-whitney") and add.failed
    assert result.warnings == []
    store = tmp_path / "stored"
    r = run_cli("gate", tmp_path / "base", tmp_path / "base", "--update-baseline", store, "--quiet")
    assert r.returncode == 0, r.stderr
    # the runs, and the manifest that lists every file npudiag put there (so a later update may replace it)
    assert sorted(p.name for p in store.iterdir()) == ["manifest.json", "run_001", "run_002", "run_003"]
    listed = json.loads((store / "manifest.json").read_text())["files"]
    on_disk = sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file())
    assert listed == [p for p in on_disk if p != "manifest.json"] and "run_001/manifest.json" in listed
    again = _gate(store, tmp_path / "cur")
    assert _verdict(again, "op:Add").base_n == 9 and [v.metric for v in again.verdicts if v.failed] == ["op:Add"]


def test_update_baseline_swaps_in_an_out_folder_that_gates_the_same(runs: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "baseline"
    r = run_cli("gate", runs["base"], runs["same"], "--update-baseline", store, "--quiet")
    assert r.returncode == 0 and (store / "manifest.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind
    again = _gate(store, runs["slow_add"])
    assert [v.metric for v in again.verdicts if v.failed] == ["op:Add"]
    before = (store / "kernels.parquet").read_bytes()
    refused = run_cli("gate", store, runs["slow_add"], "--update-baseline", store, "--quiet")
    assert refused.returncode == 1 and "not updated" in refused.stderr
    assert (store / "kernels.parquet").read_bytes() == before
    accepted = run_cli("gate", store, runs["slow_add"], "--update-baseline", store, "--accept", "--quiet")
    assert accepted.returncode == 0 and (store / "kernels.parquet").read_bytes() != before
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    clash = run_cli("gate", runs["base"], runs["same"], "--update-baseline", tmp_path / "precious", "--quiet")
    assert clash.returncode == 2 and (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


def test_compare_table_json_and_parquet(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    r = run_cli("compare", runs["base"], runs["slow_add"], "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    first = data["ops"]["rows"][0]
    assert first["key"] == "Add" and first["status"] == "both" and 1.10 < first["ratio"] < 1.20
    assert first["base_count"] == first["cur_count"]
    rows = {row["metric"]: row for row in data["totals"]["rows"]}
    assert rows["steps"]["baseline"] == rows["steps"]["current"] == STEPS
    assert rows["kernels"]["delta"] == 0 and rows["copies"]["baseline"] == rows["copies"]["current"] > 0
    diff = pq.read_table(out / "diff.parquet")
    assert diff.schema.equals(schemas.DIFF) and diff["key"][0].as_py() == "Add"
    shaped = run_cli("compare", runs["base"], runs["slow_add"], "--out", out, "--shapes", "--by", "name", "--json")
    keys = [row["key"] for row in json.loads(shaped.stdout)["ops"]["rows"]]
    assert any(" @ " in k and k.startswith("aclnnAdd_") for k in keys)
    shown = run_cli("compare", runs["base"], runs["slow_add"], "--out", out)
    assert "Add" in shown.stdout and "Totals" in shown.stdout


def test_compare_marks_added_and_removed_ops(runs: dict[str, Path]) -> None:
    from npudiag.profiling.analysis.compare import diff_ops

    base = [r.tables for r in load_side(runs["base"])]
    cur = [dict(t) for t in base]
    k = cur[0]["kernels"]
    import pyarrow.compute as pc

    cur[0]["kernels"] = k.set_column(k.schema.get_field_index("op_type"), "op_type", pc.replace_substring(k["op_type"], "Cast", "CastV2"))
    d = {row["key"]: row for row in diff_ops(base, cur).to_pylist()}
    assert d["Cast"]["status"] == "removed" and d["Cast"]["cur_total_us"] == 0.0
    assert d["CastV2"]["status"] == "added" and d["CastV2"]["ratio"] is None


def test_parse_percent() -> None:
    assert parse_percent("5%") == 0.05 and parse_percent("0.05") == 0.05 and parse_percent(0.05) == 0.05
    assert parse_percent("250%") == 2.5 and parse_percent("0") == 0.0
    for bad in ("fast", "-5%", "nan", True):
        with pytest.raises(ValueError):
            parse_percent(bad)
    for ambiguous in ("1", "1.5", 5, 1.0):  # 1 % or +100 %? a gate that guesses passes regressions
        with pytest.raises(ValueError, match="ambiguous: write"):
            parse_percent(ambiguous)


def test_a_gate_option_that_would_pass_a_regression_is_a_usage_error(runs: dict[str, Path], tmp_path: Path) -> None:
    """--accept alone turned the gate off (exit 0 on a regression); --max-regression 1 meant +100 %."""
    accept = run_cli("gate", runs["base"], runs["slow_add"], "--accept", "-q")
    assert accept.returncode == 2 and "--accept only goes with --update-baseline" in accept.stderr, accept.stderr
    for value in ("1", "5", "1.5"):
        r = run_cli("gate", runs["base"], runs["slow_add"], "--max-regression", value, "-q")
        assert r.returncode == 2 and f"write {value}%" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert run_cli("gate", runs["base"], runs["slow_add"], "--max-regression", "1%", "-q").returncode == 1
    assert run_cli("gate", runs["base"], runs["slow_add"], "--max-regression", "0.01", "-q").returncode == 1
    (tmp_path / "npudiag-gate.toml").write_text("[gate]\nmax_regression = 5\n")
    toml = run_cli("gate", runs["base"], runs["slow_add"], "-q", cwd=tmp_path)
    assert toml.returncode == 2 and "ambiguous" in toml.stderr and "npudiag-gate.toml" in toml.stderr, toml.stderr
    stored = run_cli("gate", runs["base"], runs["slow_add"], "--accept", "--update-baseline", tmp_path / "b", "-q")
    assert stored.returncode == 0 and (tmp_path / "b" / "manifest.json").is_file(), stored.stderr


def test_msprof_profiles_without_steps_gate_end_to_end(tmp_path: Path) -> None:
    from npudiag.testing.generate import write_msprof_profile

    write_msprof_profile(tmp_path / "a", kernels=600, seed=5, copies=3)
    write_msprof_profile(tmp_path / "b", kernels=600, seed=5, copies=3)
    r = run_cli("gate", tmp_path / "a", tmp_path / "b", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    step = next(m for m in data["metrics"] if m["metric"] == "step_time_us")
    assert (step["base_n"], step["cur_n"], step["method"], step["ratio"]) == (1, 1, "threshold-only", 1.0)
    assert "threshold alone" in data["warnings"][0]


def test_metrics_show_without_their_unit_and_take_either_spelling(tmp_path: Path) -> None:
    """`kernel_time_us 94.34ms` read as microseconds shown as milliseconds: the reports name a metric
    without the unit its value carries, and a config may use that name or the id."""
    from npudiag.profiling.analysis.metrics import canonical_metric

    assert canonical_metric("step_time") == "step_time_us" and canonical_metric("step_time_us") == "step_time_us"
    assert canonical_metric("module:") == "module:" and canonical_metric("op:MatMul") == "op:MatMul"
    sample = Path(__file__).resolve().parent.parent / "fixtures" / "sample_torch"
    r = run_cli("gate", sample, sample, "--metric", "computing", env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    assert re.search(r"^step_time\s", r.stdout, re.M) and re.search(r"^computing\s", r.stdout, re.M) and "_us " not in r.stdout
    j = json.loads(run_cli("gate", sample, sample, "--metric", "computing", "--json").stdout)
    assert {m["metric"] for m in j["metrics"]} >= {"step_time_us", "computing_us"}  # the ids stay the ids


def test_many_steps_a_side_are_judged(tmp_path: Path) -> None:
    """Two runs of 520 steps a side: the gate raised OverflowError (exit 3) sizing its test."""
    for name, seed in (("a", 1), ("b", 2)):
        write_torch_profile(tmp_path / name, kernels=2080, steps=520, copies=0, seed=seed)
    r = run_cli("gate", tmp_path / "a", tmp_path / "b", "--json")
    assert r.returncode in (0, 1), r.stderr
    step = next(m for m in json.loads(r.stdout)["metrics"] if m["metric"] == "step_time_us")
    assert step["base_n"] == step["cur_n"] == 520 and step["p_value"] is not None
