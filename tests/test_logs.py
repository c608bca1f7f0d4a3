"""npudiag logs: the real corpus, the console forms, the knowledge base, archives, msnpureport."""

from __future__ import annotations

import io
import json
import os
import random
import tarfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npudiag.errors import InputError
from npudiag.logs.archive import check_members, safe_extract
from npudiag.logs.formats.ascend_log import LogContext, error_codes
from npudiag.logs.formats.log_common import MAX_CONTINUATION_LINES
from npudiag.logs.ingest import read_logs
from npudiag.logs.sources import context_for, find_sources
from npudiag.logs.triage import load_kb, match_entries, summarise, triage_table
from npudiag.schemas import LOG_EVENTS, TRIAGE
from tests.helpers import parse_text

from .conftest import CORPUS_ROOT
from .helpers import both_log_paths_agree, run_cli, with_standins

LOG_CORPUS = CORPUS_ROOT / "logs"

# per real file: the error codes its text carries, and the knowledge-base entries it must trigger
EXPECTED = {
    "ascend_pytorch_48_EE1002_stream_sync_timeout_507046.log": (
        ["507046", "EE1002"],
        ["runtime-stream-sync-timeout", "stream-sync-timeout"],
    ),
    "ascend_pytorch_54_EI9999_hccl_fftsplus_timeout.log": (
        ["EI9999"],
        ["acl-stream-sync-failed", "cann-inner-error-hccl", "hccl-fftsplus-timeout"],
    ),
    "ascend_samples_16_acl_set_device_507033_dmesg.log": (["507007", "507033"], ["code-507007", "device-setup-error"]),
    "ascend_samples_21_plog_GE_PROFILING_TDT_setdevice_507033.log": ([], ["ge-dlopen-undefined-symbol"]),
    "doc_cann_troubleshooting_0119_plog_DRV_RUNTIME_oom_EL9999.log": (["EL9999"], ["cann-inner-error-driver", "driver-heap-out-of-memory"]),
    "fixture_mindcluster_faultdiag_device-1382_20250806223914702.log": ([], ["hccl-task-exception"]),
    "fixture_mindcluster_faultdiag_plog-12337_20230704214646084.log": ([], ["hccl-error-cqe"]),
    "fixture_mindcluster_faultdiag_plog-1365_20250806230935838.log": ([], ["pta-dispatch-timeout", "runtime-task-run-failed"]),
    "fixture_mindcluster_faultdiag_plog-59420_20250124110314898.log": ([], ["hccl-comm-error-table", "hccl-link-error"]),
    "gpustack_2021_plog_HCCL_CommInitRootInfo_failed_mindie.log": ([], ["hccl-comm-init-failed"]),
    "hiascend_forum_0201177680189137012_vector_core_timeout_507034.log": (
        ["507034", "EH9999"],
        ["acl-stream-sync-failed", "cann-inner-error-acl", "vector-core-timeout"],
    ),
    "llamafactory_3839_EJ0001_hccp_init_failed.log": (
        ["EJ0001", "ERR02200"],
        ["hccp-init-failed", "torch-npu-dist-hccl-failed", "tsd-wait-response-failed"],
    ),
    # the EI0002 line itself is cut off in this excerpt; the device's stuck-notify text remains
    "lmdeploy_3354_EI0002_hccl_fftsplus_notify_timeout.log": ([], ["hccl-fftsplus-timeout"]),
    "mindone_269_aicore_error_mte_ddr_out_of_range.log": ([], ["aicore-ddr-out-of-range", "aicore-error-2020"]),
    "ptoas_pr718_aicore_timeout_507014.log": (
        ["507014", "EZ9999"],
        ["aicore-kernel-task-happen-error", "aicore-timeout", "aicore-timeout-or-trap", "cann-inner-error-ops"],
    ),
    "ptoas_pr808_aivec_ub_out_of_bounds_507035.log": (
        ["507035", "EZ9999"],
        ["aiv-kernel-happen-error", "aivec-ub-out-of-bounds", "cann-inner-error-ops", "vector-core-exception"],
    ),
    "ptoas_pr816_aicpu_exception_507018.log": (["507018", "E39999"], ["aicpu-exception", "aicpu-kernel-failed", "cann-inner-error-aicpu"]),
    "touchnet_100_npu_out_of_memory.log": ([], ["npu-out-of-memory"]),
    "vllm_ascend_382_hccl_watchdog_allreduce_timeout.log": ([], ["hccl-watchdog-timeout", "torch-hccl-ops-failed"]),
    "vllm_ascend_4284_setdevice_507033_E30006_opp_verify.log": (
        ["507033", "E30006", "ERR00100"],
        ["device-setup-error", "opp-verify-failed", "torch-npu-pta-acl-failed", "tsd-wait-response-failed"],
    ),
    "vllm_ascend_486_EI0006_socket_timeout_hccl.log": (
        ["EI0006", "ERR01100"],
        ["hccl-result-6", "hccl-socket-timeout", "torch-npu-ops-acl-failed"],
    ),
    "vllm_ascend_4972_EH9999_aicore_timeout_507014.log": (
        ["507014", "EH9999", "ERR00100", "ERR02005"],
        ["aicore-timeout", "cann-inner-error-acl", "hccl-watchdog-timeout", "torch-npu-dist-internal", "torch-npu-pta-acl-failed"],
    ),
    "vllm_ascend_692_EH9999_500001_ge_init_platform_info.log": (
        ["500001", "EH9999", "ERR00100"],
        ["acl-internal-incorrect", "cann-inner-error-acl", "platform-info-init-failed", "torch-npu-pta-acl-failed"],
    ),
}


@pytest.fixture
def log_corpus() -> Path:
    if not LOG_CORPUS.is_dir():
        pytest.skip(f"real log corpus not present at {LOG_CORPUS} (only in the project workspace, not in a user's clone)")
    return LOG_CORPUS


def _parse(path: Path):
    return parse_text(path.read_text(encoding="utf-8", errors="replace"), LogContext(path.name))


def test_every_corpus_file_is_covered(log_corpus: Path) -> None:
    assert sorted(p.name for p in log_corpus.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_codes_and_triage(log_corpus: Path, name: str) -> None:
    events = _parse(log_corpus / name)
    assert events.schema.equals(LOG_EVENTS)
    codes, kb_ids = EXPECTED[name]
    found = {c for lst in events["error_codes"].to_pylist() for c in lst}
    assert found == set(codes)
    assert sorted(triage_table(events, load_kb())["kb_id"].to_pylist()) == kb_ids
    # nothing dropped: the tail of every non-blank line is in some record's message
    text = "\n".join(events["message"].to_pylist())
    raw = (log_corpus / name).read_text(encoding="utf-8", errors="replace").replace("\\n", "\n").replace('\\"', '"')
    for line in raw.splitlines():
        if line.strip():
            assert line.strip()[-24:] in text, line


def test_plog_fields(log_corpus: Path) -> None:
    r = _parse(log_corpus / "fixture_mindcluster_faultdiag_plog-1365_20250806230935838.log").to_pylist()[0]
    assert (r["level"], r["module"], r["pid"], r["process"], r["src_file"], r["src_line"], r["thread_id"], r["function"]) == (
        "ERROR",
        "RUNTIME",
        1365,
        "python3.8",
        "stars_engine.cc",
        1551,
        6219,
        "ProcLogicCqReport",
    )
    assert r["timestamp"].isoformat() == "2025-08-06T23:09:35.772604" and r["format"] == "plog" and r["device_id"] == 3
    hccl = _parse(log_corpus / "gpustack_2021_plog_HCCL_CommInitRootInfo_failed_mindie.log").to_pylist()[0]
    assert (hccl["module"], hccl["thread_id"], hccl["src_line"]) == ("HCCL", 36818, 974)
    tdt = _parse(log_corpus / "ascend_samples_21_plog_GE_PROFILING_TDT_setdevice_507033.log").to_pylist()
    assert [(r["module"], r["thread_id"]) for r in tdt[:4]] == [
        ("GE", 947062),
        ("PROFILING", 947062),
        ("PROFILING", 947062),
        ("TDT", 947062),
    ]
    assert tdt[3]["function"] == "OpenProcess" and tdt[3]["level"] == "EVENT"


def test_three_plog_records_on_one_line(log_corpus: Path) -> None:
    rows = _parse(log_corpus / "doc_cann_troubleshooting_0119_plog_DRV_RUNTIME_oom_EL9999.log").to_pylist()
    assert [(r["module"], r["line"]) for r in rows] == [("DRV", 1), ("RUNTIME", 1), ("RUNTIME", 1)]
    assert rows[1]["error_codes"] == ["EL9999"] and rows[2]["device_id"] == 1


def test_console_forms(log_corpus: Path) -> None:
    rows = _parse(log_corpus / "vllm_ascend_486_EI0006_socket_timeout_hccl.log").to_pylist()
    torch = next(r for r in rows if r["format"] == "torch_npu")
    assert (torch["module"], torch["pid"], torch["device_id"], torch["rank"], torch["error_codes"]) == ("OPS", 1292363, 1, 1, ["ERR01100"])
    cann = next(r for r in rows if r["format"] == "cann_console")
    assert cann["pid"] == 1292363 and cann["module"] == "HCCL" and cann["timestamp"].isoformat() == "2025-04-08T18:07:20.444436"
    glog = _parse(log_corpus / "vllm_ascend_382_hccl_watchdog_allreduce_timeout.log").to_pylist()
    assert glog[0]["format"] == "glog" and glog[0]["rank"] == 1 and glog[0]["src_line"] == 574 and glog[0]["level"] == "ERROR"
    assert {r["rank"] for r in glog if r["format"] == "glog"} == {0, 1}
    json_text = _parse(log_corpus / "vllm_ascend_4284_setdevice_507033_E30006_opp_verify.log").to_pylist()
    e3 = next(r for r in json_text if r["format"] == "cann_console")
    assert e3["error_codes"][0] == "E30006" and e3["module"] == "AICPU"
    tb = _parse(log_corpus / "hiascend_forum_0201177680189137012_vector_core_timeout_507034.log").to_pylist()[0]
    assert tb["format"] == "python" and tb["message"].startswith("RuntimeError: ACL stream synchronize failed, error code:507034")


def test_error_code_contexts() -> None:
    assert error_codes("acl set device 0 failed, errorCode = 507033") == ["507033"]
    assert error_codes("runtime result = 507046.") == ["507046"]
    assert error_codes("aclrtSynchronizeStream(stream) failed: 507035 (main.cpp:92)") == ["507035"]
    assert error_codes("module_name=EL9999 ret=207018") == ["EL9999", "207018"]
    assert error_codes("Kernel task happen error, retCode=0x25, errorCode=0x2a") == []  # hex task codes are not ACL codes
    assert error_codes("bytesize=8592031776 ge result = 4294967295 rank 123456") == []
    assert error_codes("[E324 13:00:25.4 x.ts:1] E1212 W0 ERR0110") == []
    assert error_codes('{"detail":"x\\nE30006: 2025-11-19 Failed"}') == ["E30006"]


def test_cut_lines_and_garbage_do_not_crash() -> None:
    text = "...[FILE:stream.cc][LIN\n[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:x\n\x00\x01 garbage \udcff\n[ERROR] GE(1"
    t = parse_text(text)
    # the cut first line is its own record; garbage continues the plog record; the cut last header is a bare [ERROR] line
    assert t["format"].to_pylist() == ["text", "plog", "app"]
    assert t["message"][1].as_py().endswith("garbage ?") and t["level"][2].as_py() == "ERROR"


@pytest.mark.slow
def test_knowledge_base_entries_each_match_their_example() -> None:
    kb = load_kb()
    assert len(kb) >= 400
    # every example parsed on its own, matched in one table: each entry must match its own example's records
    parsed = [parse_text(e.example) for e in kb]
    events = pa.concat_tables(parsed)
    starts = np.concatenate([[0], np.cumsum([t.num_rows for t in parsed])])
    matches = match_entries(events, kb)
    for i, e in enumerate(kb):
        mask = matches.get(e.id)
        assert mask is not None and mask[starts[i] : starts[i + 1]].any(), f"{e.id}: example does not match: {e.example}"
        assert e.meaning and e.fix, e.id
        # a hand-written entry and a category's general advice give causes and checks; a code's own source advice
        # may give only the fix (then the cause is what the line says)
        assert (e.causes and e.checks) or (e.id.startswith("code-") and not e.general), e.id


def test_root_cause_prefers_the_earliest_cause_across_ranks(tmp_path: Path) -> None:
    r0 = tmp_path / "rank_0" / "debug" / "plog"
    r1 = tmp_path / "rank_1" / "debug" / "plog"
    r0.mkdir(parents=True)
    r1.mkdir(parents=True)
    (r0 / "plog-100_20250806230000000.log").write_text(
        "[INFO] HCCL(100,python):2025-08-06-23:10:00.000.001 [a.cc:1][5]init ok\n"
        "[ERROR] HCCL(100,python):2025-08-06-23:40:00.000.000 [b.cc:2][5]EI0002 notify wait timeout, stuck notify num:1\n"
    )
    (r1 / "plog-200_20250806230000000.log").write_text(
        "[ERROR] RUNTIME(200,python):2025-08-06-23:09:35.772.604 [stars_engine.cc:1551]6219 ProcLogicCqReport:Task run failed, "
        "device_id=1, stream_id=2, task_id=8885\n"
    )
    sources = find_sources(str(tmp_path), [])
    assert (
        {s.ctx.rank for s in sources} == {0, 1}
        and {s.ctx.origin for s in sources} == {"host"}
        and {s.ctx.pid for s in sources} == {100, 200}
    )
    run = read_logs(sources, tmp_path / "events.parquet")
    kb = load_kb()
    s = summarise(run.problems, triage_table(run.problems, kb), kb, run.totals)
    assert s["root_cause"]["kb_id"] == "runtime-task-run-failed" and s["root_cause"]["ranks"] == [1]
    assert [r["rank"] for r in s["first_failure_by_rank"]] == [1, 0]
    assert s["records"] == 3 and s["errors"] == 2
    assert pq.read_table(tmp_path / "events.parquet").num_rows == 3


def test_only_problem_rows_are_kept_in_memory(tmp_path: Path) -> None:
    f = tmp_path / "plog-1_20250101000000000.log"
    with open(f, "w") as fh:
        for i in range(30_000):
            fh.write(f"[INFO] GE(1,p):2025-01-01-00:00:{i % 60:02d}.000.000 [g.cc:{i}]1 Run:step {i}\n")
        fh.write("[ERROR] RUNTIME(1,p):2025-01-01-00:01:00.000.000 [r.cc:9]1 F:rtStreamSynchronize failed, runtime result = 507014.\n")
    run = read_logs(find_sources(str(f), []), tmp_path / "e.parquet")
    assert run.totals["records"] == 30_001 and run.problems.num_rows == 1
    assert pq.read_metadata(tmp_path / "e.parquet").num_rows == 30_001


def test_path_context() -> None:
    c = context_for("2025-01-01-10-00-00/slog/dev-os-1/debug/device-3/device-3_20250101100000123.log")
    assert (c.origin, c.device_id) == ("device", 3)
    h = context_for("/root/ascend/log/debug/plog/plog-16027_20220618001623878.log")
    assert (h.origin, h.pid, h.device_id) == ("host", 16027, None)
    d = context_for("/root/ascend/log/debug/device-2/device-5511_20220618001623878.log")
    assert (d.origin, d.device_id, d.pid) == ("device", 2, 5511)


# -- archives ---------------------------------------------------------------------------------


def _tar(path: Path, add) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        good = b"[ERROR] HCCL(1,p):2025-01-24-11:24:07.908.572 [comm_base.cc:1018][5]   |  124.0.0.11(1)  | no connect |\n"
        info = tarfile.TarInfo("export/slog/dev-os-0/debug/device-0/device-0_20250124112407000.log")
        info.size = len(good)
        tar.addfile(info, io.BytesIO(good))
        add(tar)
    return path


def _member(name: str, **kw) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(info, k, v)
    return info


UNSAFE = {
    "absolute": (lambda t: t.addfile(_member("/etc/cron.d/x.log", size=0), io.BytesIO(b"")), "absolute path"),
    "dotdot": (lambda t: t.addfile(_member("export/../../x.log", size=0), io.BytesIO(b"")), "'..'"),
    "symlink_out": (lambda t: t.addfile(_member("export/l.log", type=tarfile.SYMTYPE, linkname="../../etc/passwd")), "outside"),
    "symlink_abs": (lambda t: t.addfile(_member("export/a.log", type=tarfile.SYMTYPE, linkname="/etc/passwd")), "absolute path"),
    "hardlink_out": (lambda t: t.addfile(_member("export/h.log", type=tarfile.LNKTYPE, linkname="../x")), "outside"),
    "device": (lambda t: t.addfile(_member("export/sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0)), "device file"),
    "fifo": (lambda t: t.addfile(_member("export/p", type=tarfile.FIFOTYPE)), "device file or FIFO"),
}


@pytest.mark.parametrize("kind", sorted(UNSAFE))
def test_unsafe_archives_are_refused_and_other_inputs_still_parsed(tmp_path: Path, kind: str) -> None:
    add, why = UNSAFE[kind]
    bad = _tar(tmp_path / f"{kind}.tar.gz", add)
    good = tmp_path / "plog-7_20250101000000000.log"
    good.write_text("[ERROR] RUNTIME(7,p):2025-01-01-00:00:00.000.000 [r.cc:1]7 F:runtime result = 507035.\n")
    r = run_cli("logs", "parse", bad, good, "--out", tmp_path / "out", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert why in r.stderr and str(bad) in r.stderr and "refusing the archive" in r.stderr
    data = json.loads(r.stdout)
    assert data["records"] == 1 and data["error_codes"][0]["code"] == "507035"
    with pytest.raises(InputError), tarfile.open(bad) as tar:
        check_members(bad, tar)
    with pytest.raises(InputError):
        safe_extract(bad, tmp_path / "x")
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").rglob("*.log"))


def test_archive_size_limit_and_safe_archive(tmp_path: Path) -> None:
    ok = _tar(tmp_path / "ok.tar.gz", lambda t: None)
    sources = find_sources(str(ok), [])
    assert len(sources) == 1 and sources[0].ctx.device_id == 0 and sources[0].ctx.origin == "device"
    run = read_logs(sources, None)
    assert run.problems.num_rows == 1 and run.problems["file"][0].as_py().endswith(
        "!export/slog/dev-os-0/debug/device-0/device-0_20250124112407000.log"
    )
    with pytest.raises(InputError, match="bytes uncompressed"):
        find_sources(str(ok), [], max_archive_bytes=10)
    names = safe_extract(ok, tmp_path / "x")
    assert (tmp_path / "x" / names[0]).is_file()
    with pytest.raises(InputError, match="already exists"):
        safe_extract(ok, tmp_path / "x")


def test_parse_stdin_and_outputs(tmp_path: Path, log_corpus: Path) -> None:
    text = (log_corpus / "ptoas_pr808_aivec_ub_out_of_bounds_507035.log").read_text()
    r = run_cli("logs", "parse", "-", "--out", tmp_path, "--json", input=text)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["root_cause"]["kb_id"] in ("vector-core-exception", "cann-inner-error-ops", "aivec-ub-out-of-bounds")
    assert {c["code"] for c in data["error_codes"]} == {"507035", "EZ9999"}
    assert pq.read_schema(tmp_path / "log_events.parquet").equals(LOG_EVENTS)
    assert pq.read_schema(tmp_path / "triage.parquet").equals(TRIAGE)
    shown = run_cli("logs", "parse", log_corpus, "--out", tmp_path / "all")
    assert shown.returncode == 0 and "Root-cause candidate" in shown.stdout and "Error codes" in shown.stdout
    missing = run_cli("logs", "parse", tmp_path / "nope.log")
    assert missing.returncode == 2 and "no such file" in missing.stderr


# -- msnpureport ------------------------------------------------------------------------------


def test_export_with_msnpureport(tmp_path: Path) -> None:
    args_log = tmp_path / "args.txt"
    host = tmp_path / "hostlogs" / "debug" / "plog"
    host.mkdir(parents=True)
    (host / "plog-9_20250101000000000.log").write_text("[ERROR] HCCL(9,p):2025-01-01-00:00:00.000.000 [h.cc:1][9]cqe err status[12]\n")
    env = with_standins({"MSNPUREPORT_ARGS_LOG": str(args_log), "ASCEND_PROCESS_LOG_PATH": str(tmp_path / "hostlogs" / "debug")})
    out = tmp_path / "export1"
    r = run_cli("logs", "export", "--out", out, "--type", "slog", "--also-host", "--archive", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert args_log.read_text().splitlines() == ["report -t 1"]  # the form CANN 8.0.RC2's log reference recommends
    assert (out / "slog" / "dev-os-1" / "debug" / "device-1").is_dir() and not (out / "hisi_logs").exists()
    assert (out / "host" / "debug" / "plog" / "plog-9_20250101000000000.log").is_file()
    assert (tmp_path / "export1.tar.gz").is_file()
    data = json.loads(r.stdout)
    assert data["root_cause"]["kb_id"] in ("hccl-task-exception", "hccl-error-cqe")
    assert {f["kb_id"] for f in data["findings"]} >= {"hccl-task-exception", "hccl-error-cqe"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".msnpureport")]
    again = run_cli("logs", "export", "--out", out, cwd=tmp_path, env=env)
    assert again.returncode == 2 and "never overwrites" in again.stderr
    forced = run_cli("logs", "export", "--history", "--out", tmp_path / "e2", cwd=tmp_path, env=env)
    assert forced.returncode == 0 and args_log.read_text().splitlines()[-1] == "report -f" and (tmp_path / "e2" / "hisi_logs").is_dir()
    clash = run_cli("logs", "export", "--history", "--type", "bbox", cwd=tmp_path, env=env)
    assert clash.returncode == 2 and "cannot be combined" in clash.stderr
    events = run_cli("logs", "export", "--events", "--out", tmp_path / "e3", cwd=tmp_path, env=env)
    assert events.returncode == 0 and args_log.read_text().splitlines()[-1] == "report -a" and (tmp_path / "e3" / "hisi_logs").is_dir()
    both = run_cli("logs", "export", "--events", "--history", cwd=tmp_path, env=env)
    assert both.returncode == 2 and "give one" in both.stderr
    default = run_cli("logs", "export", "--device", "1", "--json", cwd=tmp_path, env=env)
    assert default.returncode == 0 and len(list((tmp_path / "npudiag-logs").iterdir())) == 2  # <timestamp> and its -npudiag tables
    assert all(f["device_ids"] in ([1], []) for f in json.loads(default.stdout)["findings"])


def test_export_falls_back_to_the_bare_form_on_an_older_driver(tmp_path: Path) -> None:
    args_log = tmp_path / "args.txt"
    env = with_standins({"MSNPUREPORT_ARGS_LOG": str(args_log), "MSNPUREPORT_LEGACY": "1"})
    r = run_cli("logs", "export", "--type", "bbox", "--out", tmp_path / "old", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert args_log.read_text().splitlines() == ["report -t 2", "-t 2"]
    assert "refused the report form" in r.stderr and (tmp_path / "old" / "hisi_logs").is_dir()
    # a driver that fails for another reason is not retried in another form
    args_log.unlink()
    failing = run_cli("logs", "export", cwd=tmp_path, env=with_standins({"MSNPUREPORT_ARGS_LOG": str(args_log), "MSNPUREPORT_FAIL": "1"}))
    assert failing.returncode == 2 and args_log.read_text().splitlines() == ["report"]


def test_running_msnpureport_processes_are_counted_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from npudiag.logs import msnpureport as mr

    proc = tmp_path / "proc"
    for pid, argv in ((10, b"/usr/local/Ascend/driver/tools/msnpureport\0report\0"), (11, b"python3\0msnpureport\0"),
                      (12, b"msnpureport\0-t\0" + b"1\0"), (13, b"")):  # fmt: skip
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(argv)
    (proc / "self").mkdir()
    assert mr.running_tools(proc) == 2  # 10 and 12; 11 is python with msnpureport as an argument
    monkeypatch.setattr(mr, "running_tools", lambda proc=None: mr.MAX_PARALLEL)
    monkeypatch.setenv("PATH", str(Path(__file__).parent / "bin") + os.pathsep + os.environ.get("PATH", ""))
    with pytest.raises(mr.ToolError, match="at most 4 at once"):
        mr.export_logs(tmp_path / "x", "all", False, lambda _line: None)
    assert not (tmp_path / "x").exists()


def test_export_failures_are_one_line(tmp_path: Path) -> None:
    failing = run_cli("logs", "export", cwd=tmp_path, env=with_standins({"MSNPUREPORT_FAIL": "1"}))
    assert failing.returncode == 2 and "exit code 255" in failing.stderr and "Traceback" not in failing.stderr
    hang = run_cli("logs", "export", "--timeout", "1", cwd=tmp_path, env=with_standins({"MSNPUREPORT_HANG": "30"}))
    assert hang.returncode == 2 and "did not finish in 1 s" in hang.stderr
    none = run_cli("logs", "export", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert none.returncode == 2 and "msnpureport not found" in none.stderr


def test_level_commands(tmp_path: Path) -> None:
    args_log = tmp_path / "args.txt"
    env = with_standins({"MSNPUREPORT_ARGS_LOG": str(args_log)})
    r = run_cli(
        "logs", "level", "--global", "debug", "--module", "RUNTIME:debug", "--event", "enable", "--device", "1", "--request", env=env
    )
    assert r.returncode == 0, r.stderr
    assert args_log.read_text().splitlines() == ["-g debug -d 1", "-m RUNTIME:debug -d 1", "-e enable -d 1", "-r -d 1"]
    host = run_cli("logs", "level", "--global", "info", "--module", "HCCL:debug", "--module", "tbe:error", "--host", env=env)
    assert host.stdout.splitlines() == [
        "export ASCEND_GLOBAL_LOG_LEVEL=1",
        "export ASCEND_MODULE_LOG_LEVEL=HCCL=0:TBE=3",
        "export ASCEND_SLOG_PRINT_TO_STDOUT=1",
    ]
    bad = run_cli("logs", "level", "--global", "verbose", env=env)
    assert bad.returncode == 2 and "--global must be one of" in bad.stderr


def test_vectorised_plog_path_gives_the_same_rows(log_corpus: Path, tmp_path: Path) -> None:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(log_corpus.glob("*.log"))]
    lines = [
        "[INFO] GE(1,p):2025-08-06-23:09:35.772.604 [graph_manager.cc:12]77 RunGraph:Run graph 1 success",
        "[ERROR] RUNTIME(1,p):2025-08-06-23:09:36.000.001 [api_c.cc:9]77 rtStreamSynchronize:ErrCode=507014, device_id=2",
        "   |  dest_ip(rank_id)  |  src_ip(rank_id)   |",
        "[EVENT] TDT(1,p):2025-08-06-23:09:37.100.200 [process_mode_manager.cpp:103][OpenProcess][tid:9] [Rank 3] open",
        "[ERROR] DRV(1,p):2025-08-06-23:09:38.000.000 [ascend][drv] x[FUNC:Alloc][FILE:devmm.c][LINE:88]",
        # each thread form, and the firmware's text form on a record of another module with no [file:line]
        "[DEBUG] PROFILING(1,p):2025-08-06-23:09:38.000.001 [msprof_callback_impl.cpp:79] >>> (tid:77) called",
        "[INFO] HCCL(1,p):2025-08-06-23:09:38.000.002 [op_base.cc:5][123][Entry-HcclAllReduce]tag[x]",
        "[INFO] TDT(1,p):2025-08-06-23:09:38.000.003 [tsd.cpp:5][123][tid:6] open",
        "[INFO] DRV(1,p):2025-08-06-23:09:38.000.004 17 (cpuid:0) path/x.c:1193 task_done: ok",
        "[INFO] DRV(1,p):2025-08-06-23:09:38.000.005 [d.c:3] 17 (cpuid:0) path/x.c:1193 task_done: ok",
    ]
    texts.append("\n".join(lines * 50))
    # the mindcluster plogs, the GE/TDT excerpt and the generated text take the fast path
    assert both_log_paths_agree(texts, 8) >= 6
    # and what the new lines say, read by eye: (thread, function, source file, source line)
    rows = parse_text("\n".join(lines[5:]), LogContext("x.log")).to_pylist()
    assert [(r["thread_id"], r["function"], r["src_file"], r["src_line"]) for r in rows] == [
        (77, None, "msprof_callback_impl.cpp", 79),
        (123, None, "op_base.cc", 5),
        (6, "123", "tsd.cpp", 5),
        (None, "task_done", "path/x.c", 1193),  # the firmware's form, no [file:line] of its own
        (None, None, "d.c", 3),  # a [file:line] of its own: the text is only text
    ]


def _corpus_lines() -> list[str]:
    if not LOG_CORPUS.is_dir():
        return ["[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:runtime result = 507014."]
    return [line for p in sorted(LOG_CORPUS.glob("*.log")) for line in p.read_text(encoding="utf-8", errors="replace").splitlines()]


_LINES = _corpus_lines()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.tuples(st.integers(0, len(_LINES) - 1), st.integers(0, 400), st.text(max_size=6)), min_size=1, max_size=40),
)
def test_fuzz_mixed_and_cut_lines_never_crash_and_both_paths_agree(picks) -> None:
    lines = []
    for i, cut, junk in picks:
        line = _LINES[i]
        lines.append(line[:cut] + junk if cut < len(line) else line)
    text = "\n".join(lines)
    fast = parse_text(text, LogContext("f.log"))
    slow = parse_text(text, LogContext("f.log"), vectorised=False)
    assert fast.to_pylist() == slow.to_pylist()
    assert fast.schema.equals(LOG_EVENTS)


_PLOG_LINES = [x for x in _LINES if x.startswith("[") and "):20" in x] + [
    "   |  dest_ip(rank_id)  |  src_ip(rank_id)   |",
    "plain continuation text",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.tuples(st.integers(0, len(_PLOG_LINES) - 1), st.integers(0, 300), st.text(max_size=4)), min_size=1, max_size=30))
def test_fuzz_plog_chunks_agree_with_the_line_parser(picks) -> None:
    lines = [_PLOG_LINES[0]]
    for i, cut, junk in picks:
        line = _PLOG_LINES[i]
        lines.append(line[:cut] + junk if cut < len(line) else line)
    text = "\n".join(lines)
    assert parse_text(text, LogContext("p.log")).to_pylist() == parse_text(text, LogContext("p.log"), vectorised=False).to_pylist()


_FIELD_TEXT = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))  # no line breaks of any kind


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    heads=st.lists(
        st.tuples(
            st.sampled_from(["ERROR", "WARNING", "INFO", "DEBUG", "EVENT", "TRACE", "OPLOG"]),
            st.text("AZaz_09", min_size=1, max_size=36),  # the line parser's PLOG allows 32
            st.from_regex(r"-?[0-9\u0661\u0967]{1,12}", fullmatch=True),  # and 10 (ASCII) digits
            st.text(_FIELD_TEXT.filter(lambda c: c != ")"), max_size=132),  # and 128 characters
            st.one_of(
                st.just(""),
                st.builds(
                    lambda f, n: f" [{f}:{n}]",
                    st.text(_FIELD_TEXT.filter(lambda c: c not in "]:"), min_size=1, max_size=260),  # and 256
                    st.from_regex(r"[0-9\u0661]{1,11}", fullmatch=True),  # and 9 (ASCII) digits
                ),
                st.sampled_from([" [a.cc:x]", " [a:b:1]", "  [a.cc:1]", " [a.cc:1", " [:1]"]),
            ),
            st.text(_FIELD_TEXT, max_size=20),
            # times that exist and times that do not (30 February, second 60, year 0, month 13)
            st.from_regex(r"[0-9]{4}-[01][0-9]-[0-3][0-9]-[0-2][0-9]:[0-6][0-9]:[0-6][0-9]\.[0-9]{3}\.[0-9]{3}", fullmatch=True),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_fuzz_plog_header_fields_and_bounds_agree_with_the_line_parser(heads) -> None:
    # the vectorised path cuts the header's fields at their delimiters and reads the time from its digits; the
    # line parser reads them with its own regex (PLOG, whose fields have bounds) and datetime(): every header, in
    # bounds or past them, with a time that exists or not, gives the same row
    lines = [f"[{level}] {module}({pid},{process}):{ts}{source}{text}" for level, module, pid, process, source, text, ts in heads]
    plain = "[INFO] GE(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]7 F:x"
    text = "\n".join([plain, *lines, plain] * 3)
    both_log_paths_agree([text], 4)
    # and each header read as its parts say, worked out here with string operations and datetime()
    rows = {r["line"]: r for r in parse_text(text, LogContext("h.log")).to_pylist()}
    for i, (level, module, pid, process, source, tail, ts) in enumerate(heads):
        row = rows.get(i + 2)
        digits = pid.removeprefix("-")
        if not (len(module) <= 32 and 1 <= len(digits) <= 10 and digits.isascii() and digits.isdigit() and len(process) <= 128):
            assert row is None or row["module"] != module, lines[i]  # past a bound: not a header
            continue
        assert (row["level"], row["module"], row["process"]) == (level, module, process)
        assert row["pid"] == (int(pid) if int(pid) >= 0 else None)  # firmware's -1: no process
        try:
            when = datetime(*(int(ts[a:b]) for a, b in ((0, 4), (5, 7), (8, 10), (11, 13), (14, 16), (17, 19))))
            when += timedelta(microseconds=int(ts[20:23]) * 1000 + int(ts[24:27]))
        except ValueError:
            when = None
        assert row["timestamp"] == when, ts
        after = source + tail  # a [file:line] right after the time: no "]" or ":" in the file, 1 - 9 ASCII digits
        inner = after[2 : after.find("]")] if after.startswith(" [") and "]" in after else ""
        name, _, number = inner.partition(":")
        if 1 <= len(name) <= 256 and ":" not in number and 1 <= len(number) <= 9 and number.isascii() and number.isdigit():
            assert (row["src_file"], row["src_line"]) == (name, int(number)), lines[i]


_TEXT_FORMS = [
    "{n} {w}:text",  # a runtime thread and function
    "[{w}][tid:{n}] text",
    "  [{n}] text",
    " >>> (tid:{n}) text",
    "17 (cpuid:0) path/x.c:{n} {w}: text",  # the TS firmware's form, on a record with no [file:line]
    "x [FUNC:{w}][FILE:a.c][LINE:{n}] text",
    "device_id={n} deviceId[{n}] devId: {n} text",
    "[Rank {n}] rank[{n}] text",
    "ErrCode={n} ret {n} E{w}{n} EZ{n} text",
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    forms=st.lists(
        st.tuples(
            st.sampled_from(_TEXT_FORMS),
            st.text("0123456789\u0661\u0663\u0967\uff11", min_size=1, max_size=8),  # ASCII digits and others
            st.text("Fx_\u00e9\u0436\u01c5", min_size=1, max_size=5),  # ASCII letters and others
            st.booleans(),  # after a [file:line] or not
        ),
        min_size=1,
        max_size=10,
    )
)
def test_fuzz_digits_and_letters_of_any_script_are_read_alike_by_both_paths(forms) -> None:
    # the vectorised path's RE2 takes ASCII digits, letters and spaces for \d, \w and \s; the line parser's
    # patterns must too, or a thread, device, rank, source line or code written in another script's digits is
    # read on one path and not on the other
    lines = [
        f"[ERROR] RUNTIME(7,p):2025-08-06-23:09:35.772.604{' [a.cc:1]' if src else ''}" + form.format(n=n, w=w) for form, n, w, src in forms
    ]
    plain = "[INFO] GE(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]7 F:x"
    text = "\n".join([plain, *lines, plain] * 3)
    both_log_paths_agree([text], 4)
    # and what three of the forms state, worked out here: only ASCII digits and letters count
    rows = {r["line"]: r for r in parse_text(text, LogContext("s.log")).to_pylist()}
    for i, (form, n, w, _) in enumerate(forms):
        row, ascii_number = rows[i + 2], n.isascii() and n.isdigit()
        if form == _TEXT_FORMS[0]:  # "{n} {w}:": a thread and function only where both are ASCII
            word = w.isascii() and all(c.isalnum() or c == "_" for c in w)
            assert (row["thread_id"], row["function"]) == ((int(n), w) if ascii_number and word else (None, None))
        elif form == _TEXT_FORMS[6]:  # "device_id={n}": the ASCII digits it starts with
            lead = n[: len(n) - len(n.lstrip("0123456789"))]
            assert row["device_id"] == (int(lead) if lead else None)
        elif form == _TEXT_FORMS[7]:  # "[Rank {n}]": a rank only where every digit is ASCII
            assert row["rank"] == (int(n) if ascii_number else None)


_OTHER_LINES = [x for x in _LINES if not (x.startswith("[") and "):20" in x) and x.strip()] + [
    "[rank3]:[ERROR] HCCL(9,p):2025-08-06-23:09:35.772.604 [h.cc:1]9 prefixed",
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "RuntimeError: NPU function error: aclrtSynchronizeStream(stream), error code is 507014",
    "[ERROR] A(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 x[ERROR] B(1,p):2025-08-06-23:09:35.772.605 [b.cc:2]1 two on a line",
    "E39999: Inner Error!",
    "text with a literal \\n inside",
]


_SCRIPTS = {
    "ideographic space first": lambda x: "\u3000" + x,
    "no-break space first": lambda x: "\xa0" + x,
    "ideographic spaces inside": lambda x: x.replace(" ", "\u3000", 2),
    "Arabic-Indic digits": lambda x: x.translate(
        str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")
    ),
    "accented letters": lambda x: x.replace("e", "\u00e9", 2),
}


@pytest.mark.parametrize("script", sorted(_SCRIPTS))
def test_every_other_form_in_other_scripts_is_read_alike_by_both_paths(script: str) -> None:
    # each corpus line of a non-plog form (console, dmesg, syslog, Python, glog...) with its spaces, digits or
    # letters from another script, between plog records: the line parser's patterns are ASCII like RE2's, so
    # both paths read each alike (51 of 692 such lines were read differently before)
    plain = "[INFO] GE(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]7 F:x"
    change = _SCRIPTS[script]
    texts = ["\n".join([plain, plain, change(x), plain, plain]) for x in _OTHER_LINES]
    assert both_log_paths_agree(texts, 4) >= len(texts) // 2
    # and, counted from the text alone, every non-blank line lands in a record
    for text in texts:
        rows = parse_text(text, LogContext("o.log")).to_pylist()
        covered = {n for r in rows for n in range(r["line"], r["line"] + r["line_count"])}
        assert covered == {n for n, x in enumerate(text.splitlines(), 1) if x.strip()}, text


@pytest.mark.parametrize("chunk", [8, 64])
def test_rare_lines_in_plog_cost_their_own_record_not_the_chunk(chunk: int) -> None:
    # plog with a few lines of every other form mixed in (2 %), as captured stdout and device logs are: the
    # vectorised path still takes the chunks (their other records go line by line) and the rows equal the
    # line parser's, record for record
    rng = random.Random(chunk)
    plog = [x for x in _PLOG_LINES if x.startswith("[")]
    texts = []
    for _ in range(12):
        lines = [rng.choice(plog)]
        for _ in range(400):
            lines.append(rng.choice(_OTHER_LINES) if rng.random() < 0.02 else rng.choice(plog))
        texts.append("\n".join(lines))
    runaway = [plog[0], *[f"    register dump 0x{i:04x}" for i in range(2100)], *plog[1:40]]  # a record past the continuation cap
    texts.append("\n".join(runaway * 2))
    # a device log's exception register dump (real lines from the corpus device log): past the cap each line is a
    # text record of its own, taken on the vectorised path too
    dump = [x for x in _LINES if x.startswith("<exception_print>")] or ["<exception_print>AIC_ERROR=0x10 device_id=3"]
    texts.append("\n".join([plog[0], *(dump * (900 // len(dump) + 1))[:900], "", *dump[:5], *plog[1:20]] * 2))
    used = both_log_paths_agree(texts, chunk)
    assert used >= 12 * (400 // chunk) * 0.5, used  # was: a chunk with one rare line went whole to the line parser


@pytest.mark.parametrize("first", ["\xa0", "\u3000", "\t", "\u00e9", "x"])
def test_a_runaway_record_splits_by_the_first_character_of_its_later_lines(first: str) -> None:
    # past the continuation cap a line opens a text record of its own unless it is indented (str.isspace of its
    # first character, Unicode spaces included), in which case the line parser reads the record whole
    plog = "[ERROR] DRV(1,p):2025-08-06-23:09:35.772.604 [d.c:3] dump follows"
    later = [f"{first}reg 0x{i:04x}" if i % 97 == 5 else f"reg 0x{i:04x}" for i in range(2100)]
    text = "\n".join([plog, *later, plog, plog] * 4)
    assert both_log_paths_agree([text], 4096) >= 1
    # counted here: the header keeps 399 lines, the next opens a text record and every later one that does not
    # start with a space (str.isspace) opens another
    past = later[MAX_CONTINUATION_LINES - 1 :]
    opened = 1 + sum(not x[:1].isspace() for x in past[1:])
    rows = parse_text(text, LogContext("r.log")).to_pylist()
    assert sum(r["format"] == "text" for r in rows) == 4 * opened


def test_a_time_that_does_not_exist_is_no_time_and_the_rest_is_parsed(tmp_path: Path) -> None:
    # a plog line dated year 0 (no datetime holds it) made the whole parse an internal error, and 30 February
    # was read as 2 March; each is now a record without a time, its neighbours read as usual
    good = "[ERROR] RUNTIME(7,p):2025-08-06-23:09:35.772.604 [a.cc:1]7 F:ErrCode=507014"
    lines = [good] * 40_000 + [
        "[ERROR] RUNTIME(7,p):0000-01-01-00:00:00.000.000 [a.cc:2]7 F:year zero",
        "[ERROR] RUNTIME(7,p):2025-02-30-00:00:00.000.000 [a.cc:3]7 F:thirtieth of February",
        "[ERROR] RUNTIME(7,p):2025-01-01-23:59:60.000.000 [a.cc:4]7 F:second sixty",
    ]
    log = tmp_path / "plog-7_20250806230935000.log"
    log.write_text("\n".join(lines) + "\n")
    r = run_cli("logs", "parse", log, "--out", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(tmp_path / "out" / "log_events.parquet", columns=["line", "timestamp"]).to_pylist()
    assert len(rows) == 40_003
    assert [x["timestamp"] for x in rows[-3:]] == [None, None, None]
    assert rows[0]["timestamp"].isoformat() == "2025-08-06T23:09:35.772604"
    assert json.loads(r.stdout)["errors"] == 40_003


def test_export_since_last_keeps_only_new_or_changed_files(tmp_path: Path) -> None:
    import hashlib

    env = with_standins({"MSNPUREPORT_STATE": str(tmp_path / "device-store")})
    first = run_cli("logs", "export", "--since", "last", "--out", tmp_path / "logs" / "e1", "--json", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    e1 = sorted(p.relative_to(tmp_path / "logs" / "e1").as_posix() for p in (tmp_path / "logs" / "e1").rglob("*") if p.is_file())
    record = json.loads((tmp_path / "logs" / "npudiag-exported.json").read_text())
    # the record holds every exported file with its size and sha256, recomputed here
    assert sorted(record["files"]) == e1 and len(e1) > 5
    for rel, entry in record["files"].items():
        data = (tmp_path / "logs" / "e1" / rel).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    # the device exports everything again, device 1's log having grown: only that file is kept
    second = run_cli("logs", "export", "--since", "last", "--out", tmp_path / "logs" / "e2", cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    e2 = [p.relative_to(tmp_path / "logs" / "e2").as_posix() for p in (tmp_path / "logs" / "e2").rglob("*") if p.is_file()]
    (grown,) = e2
    assert grown.startswith("slog/dev-os-1/debug/device-1/device-1_")
    assert "1 file(s) new or changed since the last export" in second.stderr and f"{len(e1) - 1} already exported" in second.stderr
    record = json.loads((tmp_path / "logs" / "npudiag-exported.json").read_text())
    assert record["files"][grown]["sha256"] == hashlib.sha256((tmp_path / "logs" / "e2" / grown).read_bytes()).hexdigest()
    # without --since everything is exported, and the record is left alone
    full = run_cli("logs", "export", "--out", tmp_path / "logs" / "e3", cwd=tmp_path, env=env)
    assert full.returncode == 0 and len([p for p in (tmp_path / "logs" / "e3").rglob("*") if p.is_file()]) == len(e1)
    assert json.loads((tmp_path / "logs" / "npudiag-exported.json").read_text()) == record
    # a file of that name that is not npudiag's record is refused, not replaced
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "npudiag-exported.json").write_text('{"mine": 1}')
    r = run_cli("logs", "export", "--since", "last", "--out", tmp_path / "other" / "e", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "not npudiag's export record" in r.stderr and not (tmp_path / "other" / "e").exists()
    assert (tmp_path / "other" / "npudiag-exported.json").read_text() == '{"mine": 1}'
    bad = run_cli("logs", "export", "--since", "yesterday", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "--since takes 'last'" in bad.stderr


LOGS = CORPUS_ROOT / "logs"


def test_c10_lines_without_a_year_are_ordered_by_their_time(tmp_path: Path) -> None:
    """torch_npu's `[rank1]:[E324 13:00:25.428 ...]` (c10 logging: month, day and time, no year) once
    had no time at all: "first seen: -" and rank 1 (13:00:25.428) listed before rank 0 (.236). Recount
    from the raw file: each rank's earliest c10 error line."""
    import re

    f = LOGS / "vllm_ascend_382_hccl_watchdog_allreduce_timeout.log"
    if not f.is_file():
        pytest.skip(f"log corpus not present at {LOGS}")
    first: dict[int, str] = {}
    for line in f.read_text().splitlines():
        m = re.match(r"\[rank(\d+)\]:\[E(\d\d?)(\d\d) (\d\d:\d\d:\d\d)\.(\d{6})", line)
        if m:
            t = f"--{int(m.group(2)):02d}-{m.group(3)} {m.group(4)}.{m.group(5)}"
            first[int(m.group(1))] = min(first.get(int(m.group(1)), t), t)
    r = run_cli("logs", "parse", f, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    ranks = [(x["rank"], "--" + x["timestamp_no_year"][5:].replace("T", " ")) for x in s["first_failure_by_rank"]]
    assert ranks == sorted(((k, v) for k, v in first.items()), key=lambda kv: kv[1]) and ranks[0][0] == 0
    text = run_cli("logs", "parse", f, "--out", tmp_path / "o", "--force", env={"COLUMNS": "120"}).stdout
    assert f"first seen: {first[0]}" in text and re.search(r"first seen: -\s", text) is None


def test_a_copy_of_a_plog_in_the_same_collection_counts_once(tmp_path: Path) -> None:
    """The 2024 asys collection holds a plog and a renamed near-copy of it: every timeline line came
    twice and every count doubled. Recount from the raw files: the ERROR lines, each line once
    across files (a line a file repeats itself still counts each time)."""
    from collections import Counter

    root = LOGS / "real-folders" / "oamtools-asys-2024"
    if not root.is_dir():
        pytest.skip(f"log corpus not present at {root}")
    most: Counter[str] = Counter()
    for f in root.rglob("*.log"):
        mine = Counter(line.rstrip("\n") for line in f.open(errors="replace") if line.startswith(("[ERROR]", "[FATAL]")))
        for line, n in mine.items():
            most[line] = max(most[line], n)
    r = run_cli("logs", "parse", root, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["errors"] == sum(most.values())
    lines = [(t["timestamp"], t["message"]) for t in s["timeline"]]
    assert len(lines) == len(set(lines))
    assert [(x["records"] > 0, x["file"] != x["same_as"]) for x in s["repeated_files"]] == [(True, True)]


def test_a_stated_rank_no_column_holds_is_null_on_both_paths() -> None:
    # the vectorised path gave the path's rank (5) where a line states one too large for int32; the line
    # parser, the reference, keeps it null: a stated rank is never replaced by the path's
    from npudiag.logs.formats import ascend_log

    line = "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [a.cc:1][9][Rank 99999999999] x"
    saved = ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES
    ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = 64, 0
    try:
        fast = parse_text("\n".join([line] * 200), LogContext("r.log", rank=5))
    finally:
        ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = saved
    slow = parse_text("\n".join([line] * 200), LogContext("r.log", rank=5), vectorised=False)
    assert fast["rank"].to_pylist() == slow["rank"].to_pylist() == [None] * 200


def test_every_record_holds_the_codes_its_message_states(log_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the Python definition (error_codes; none at an information level) on each record's message, against
    # what both paths store after their RE2 prefilter: a code the prefilter misses would be lost silently
    quiet = {"INFO", "DEBUG", "EVENT", "TRACE", "OPLOG"}
    wide = "error code is        :        [507014"  # the widest spacing ACL's form allows before the digits
    lines = [
        f"[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:{wide}",
        f"{wide} on a console line",
        "[INFO] GE(1,p):2025-08-06-23:09:35.772.605 [a.cc:2]1 F:EZ9999 registered (a catalogue line)",
        "[WARNING] GE(1,p):2025-08-06-23:09:35.772.606 [a.cc:3]1 F:retCode=0x25 result = 507035 and EI0002",
    ]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(log_corpus.glob("*.log"))]
    texts.append("\n".join(lines * 40))
    from npudiag.logs.formats import ascend_log

    monkeypatch.setattr(ascend_log, "CHUNK_LINES", 8)  # short texts take the vectorised path too
    monkeypatch.setattr(ascend_log, "MIN_VECTOR_LINES", 0)
    seen = 0
    for text in texts:
        for vectorised in (True, False):
            for row in parse_text(text, LogContext("x.log"), vectorised=vectorised).to_pylist():
                expected = [] if row["level"] in quiet else error_codes(row["message"])
                assert row["error_codes"] == expected, row["message"][:200]
                seen += bool(expected)
    assert seen > 100
    # the generated lines' codes, read by eye (ACL's 6-digit code after its words, a CANN code anywhere; the
    # console line continues the ERROR record, whose code counts once)
    rows = parse_text("\n".join(lines * 40), LogContext("x.log")).to_pylist()[:3]
    assert [(r["line"], r["error_codes"]) for r in rows] == [(1, ["507014"]), (3, []), (4, ["EI0002", "507035"])]


def test_a_file_is_parsed_as_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # the reader hands the parser Blocks (a megabyte of lines each); the first rows must come after the
    # lines they need, not after hundreds of Blocks (the prefix sample once took 256 of them: 256 MB held)
    from npudiag.logs.formats import ascend_log
    from npudiag.logs.formats.log_common import Block

    monkeypatch.setattr(ascend_log, "CHUNK_LINES", 64)
    line = "[INFO] GE(1,p):2025-08-06-23:09:35.772.604 [graph_manager.cc:12]77 RunGraph:Run graph 1 success"
    taken = 0

    def blocks():
        nonlocal taken
        for _ in range(1000):
            taken += 1
            yield Block([line] * 10)

    parser = ascend_log.LogParser(LogContext("p.log"))
    first = next(iter(parser.parse(blocks())))
    assert first.num_rows > 0
    assert taken <= 40, taken  # the 256-line sample (26 Blocks) and a few chunks in flight
