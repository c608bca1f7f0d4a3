"""Log triage on real fault folders: levels, firmware / driver / syslog forms, prefixes, records, safe output.

Every expectation about a real file is written here with the line a human reads as the fault, and
recomputed from the raw text with plain string operations (not npudiag code).
"""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pytest

from npudiag.logs.formats.ascend_log import LogParser
from npudiag.logs.formats.log_common import QUIET_LEVELS, LogContext
from npudiag.logs.ingest import read_logs
from npudiag.logs.sources import find_sources
from npudiag.logs.triage import load_kb, match_entries, summarise, triage_table
from npudiag.schemas import LOG_EVENTS
from npudiag.tomlfile import read_toml
from tests.helpers import parse_text

from .conftest import CORPUS_ROOT
from .helpers import both_log_paths_agree
from .hostile import run

LOGS = CORPUS_ROOT / "logs"
REAL = LOGS / "real-folders"

# folder -> (kb entry, file name, line, a phrase of that line, device): the device-side fault a reader names
ROOT_CAUSES = {
    # the TS firmware's record of the AI Core exception (device clock); the host plog's line 14 says
    # "there is a aicore error ... Illegal instruction" for the same fault
    "oamtools-msnpureport-2020": ("tsch-aicore-exception", "device-0_20201224011054112.log", 1, "bs_done_exception_proc", 0),
    "oamtools-asys-2024": ("fftsplus-core-exception", "invalid-tiling-test.log", 3, "there is an fftsplus aivector error exception", 0),
    "oamtools-collect-plogs": ("vector-core-exception", "plog-588579_20250402071926352.log", 3, "there is an aivec error exception", 0),
}


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"corpus not found at {path} (set NPUDIAG_CORPUS)")


def _raw_lines(path: Path) -> list[str]:
    # the same line split the reader uses (universal newlines, nothing translated)
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return fh.readlines()


def _parse_file(path: Path) -> pa.Table:
    parser = LogParser(LogContext(str(path)))
    return pa.Table.from_batches(list(parser.parse(_raw_lines(path))), schema=LOG_EVENTS)


def _summary(folder: Path) -> dict:
    run_ = read_logs(find_sources(str(folder), []), None)
    kb = load_kb()
    return summarise(run_.problems, triage_table(run_.problems, kb), kb, run_.totals)


@pytest.mark.parametrize("folder", sorted(ROOT_CAUSES))
def test_real_folder_root_cause_is_the_device_fault(folder: str) -> None:
    _need(REAL / folder)
    kb_id, name, line, phrase, device = ROOT_CAUSES[folder]
    s = _summary(REAL / folder)
    root = s["root_cause"]
    assert root is not None and root["kb_id"] == kb_id and root["role"] == "device_fault"
    assert Path(root["first_file"]).name == name and root["first_line"] == line
    assert device in root["device_ids"]
    # the line really says it (read with plain file reading)
    raw = _raw_lines(Path(root["first_file"]))[line - 1]
    assert phrase in raw


def _all_log_files() -> list[Path]:
    if not LOGS.is_dir():
        return []
    return sorted(p for p in LOGS.rglob("*") if p.is_file() and p.suffix in (".log", ".txt"))


@pytest.mark.parametrize("path", _all_log_files(), ids=lambda p: p.name)
def test_every_line_lands_in_exactly_one_record(path: Path) -> None:
    raw = _raw_lines(path)
    t = _parse_file(path)
    starts, counts = t["line"].to_pylist(), t["line_count"].to_pylist()
    covered: dict[int, int] = {}
    for s, c in zip(starts, counts):
        assert c >= 1
        for n in range(s, s + c):
            covered[n] = covered.get(n, 0) + 1
    starts_at = {}
    for s in starts:
        starts_at[s] = starts_at.get(s, 0) + 1
    for n, text in enumerate(raw, 1):
        if text.strip():
            assert n in covered, f"{path.name}:{n} is in no record: {text[:80]!r}"
            # in more than one record only where several records start on that one line
            assert covered[n] == 1 or starts_at.get(n, 0) >= covered[n] - 1, f"{path.name}:{n} in {covered[n]} records"


@pytest.mark.parametrize("path", _all_log_files(), ids=lambda p: p.name)
def test_no_information_line_is_an_error(path: Path) -> None:
    t = _parse_file(path)
    kb = load_kb()
    rows = t.select(["level", "error_codes"]).to_pylist()
    quiet = [i for i, r in enumerate(rows) if r["level"] in QUIET_LEVELS]
    assert all(not rows[i]["error_codes"] for i in quiet)
    plain_entries = [e for e in kb if not e.levels]
    for mask in match_entries(t, plain_entries).values():
        assert not any(mask[i] for i in quiet)
    s = summarise(t, triage_table(t, kb), kb)
    if s["first_error"] is not None:
        assert s["first_error"]["level"] not in QUIET_LEVELS


def test_error_code_catalogue_at_info_is_counted_not_taken(tmp_path: Path) -> None:
    lines = [
        f"[INFO] GE(4011,python3):2025-03-01-10:00:00.{i // 1000:03d}.{i % 1000:03d} [error_manager.cc:265]4011 "
        f"ParseJsonFile:add error_code E{10001 + i:05d} success"
        for i in range(470)
    ]
    lines.append(
        "[ERROR] RUNTIME(4011,python3):2025-03-01-10:01:07.000.001 [device_error_proc.cc:1434]4011 ProcessStarsCoreErrorInfo:"
        "The error from device(chipId:0, dieId:0), serial number is 3, there is an aicore error exception, core id is 2"
    )
    lines.append(
        "[ERROR] RUNTIME(4011,python3):2025-03-01-10:01:07.000.900 [api_c_stream.cc:147]4011 "
        "rtStreamSynchronize:ErrCode=507015, desc=[aicore exception]"
    )
    path = tmp_path / "plog-4011_20250301100000000.log"
    path.write_text("\n".join(lines) + "\n")
    s = _summary(path)
    assert s["info_records_naming_codes"] == 470
    assert [c["code"] for c in s["error_codes"]] == ["507015"]
    assert s["first_error"]["level"] == "ERROR" and "there is an aicore error" in s["first_error"]["message"]
    assert s["root_cause"]["kb_id"] in ("aicore-error-2020", "aicore-exception") and s["root_cause"]["role"] == "device_fault"


def test_tsch_firmware_lines_of_both_eras() -> None:
    t = parse_text(
        "[ERROR] TSCH(-1,null):2020-12-23-17:10:54.083.518 17 (cpuid:0) ../../tsch/firmware/feature/src/bs/ai_core_dispatcher.c:1193 "
        "bs_done_exception_proc: slot_id=0, TSC_TERM_CODE=0x1\n"
        "<exception_print>AIC_ERROR=0x10\n"
        "[ERROR] TSCH(-1,null):2024-02-08-01:41:14.977.406 3986 (dieid:0,cpuid:0) stars_timewheel.c:90 stars_wait_sqe_is_timeout: "
        "Timeout: sq_pid=80029, sq_id=3\n"
    ).to_pylist()
    assert [r["format"] for r in t] == ["plog", "plog"]
    a, b = t
    assert (a["module"], a["pid"], a["src_file"], a["src_line"], a["function"]) == (
        "TSCH",
        None,
        "../../tsch/firmware/feature/src/bs/ai_core_dispatcher.c",
        1193,
        "bs_done_exception_proc",
    )
    assert a["timestamp"].isoformat() == "2020-12-23T17:10:54.083518" and a["line_count"] == 2
    assert "<exception_print>AIC_ERROR=0x10" in a["message"]
    assert (b["src_file"], b["src_line"], b["function"]) == ("stars_timewheel.c", 90, "stars_wait_sqe_is_timeout")


def test_syslog_kernel_and_dmesg_levels() -> None:
    text = (
        'May  8 09:05:00 (none) cron.info crond[4829]: USER root pid 9536 cmd ps -ef | grep -v grep | grep -Eq "process-manager"\n'
        "May  8 17:24:32 (none) kern.warn kernel: [48596.522791][T10066] [ascend] [icm] [icm_ipc_msg_send_sync 560] "
        "<kworker/0:0:10066> wait response time too long.(time=218(ms), chan_id=13)\n"
        "May  8 09:27:34 (none) user.info aicpu_scheduler: (10726)dlog_core.c:462: dlog has been inited.\n"
        "Dec  3 10:00:00 host kernel: [ 12.000001] {6}[Hardware Error] Hardware error from APEI Generic Hardware Error Source: 0\n"
        "<3>[ 2204.894988] [ascend] [devdrv] [devdrv_heart_beat_callback 1338] receive ts exception msg\n"
        "kern  :err   : [ 2081.843939] [ascend] [devmm] [devmm_alloc 662] alloc failed\n"
        "[ 2081.844043] [ascend] [devmm] [devmm_svm_release_proc 617] <davinci_recycle:42400,42400> Devmm release create work.\n"
        "[EVENT] KERNEL(1396,None):2020-12-24-01:10:56.165.052 [klogd.c:248][2204.894988] [ascend] [ERROR] [devdrv] "
        "[devdrv_heart_beat_callback 1338] <swapper/0:0> receive ts exception msg\n"
    )
    rows = parse_text(text).to_pylist()
    assert [r["line"] for r in rows] == list(range(1, 9)) and all(r["line_count"] == 1 for r in rows)
    got = [(r["format"], r["level"], r["module"]) for r in rows]
    assert got == [
        ("syslog", "INFO", "crond"),
        ("syslog", "WARNING", "ICM"),
        ("syslog", "INFO", "aicpu_scheduler"),
        ("syslog", "ERROR", "KERNEL"),
        ("dmesg", "ERROR", "DEVDRV"),
        ("dmesg", "ERROR", "DEVMM"),
        ("dmesg", "INFO", "DEVMM"),
        ("plog", "ERROR", "KERNEL"),
    ]
    assert rows[0]["pid"] == 4829


def test_black_box_history_and_device_info() -> None:
    rows = parse_text(
        "[2020-12-24-01:10:56.177575] system exception code [0xB4060006]: ModuleName [TS], ExceptionReason [TS_EXCEPTION], "
        "TimeStamp [20201224011056-159304001].\n"
        "dir        phy-id    logic-id    status\n"
        "device-0   0         0           os running\n"
        "device-1   1         1           offline\n"
    ).to_pylist()
    assert (rows[0]["format"], rows[0]["level"], rows[0]["module"]) == ("bbox", "ERROR", "TS")
    assert rows[0]["timestamp"].isoformat() == "2020-12-24T01:10:56.177575"
    assert [r["format"] for r in rows[1:]] == ["text", "device_info", "device_info"]
    assert [(r["device_id"], r["level"]) for r in rows[2:]] == [(0, "INFO"), (1, "WARNING")]


def test_unclaimed_lines_are_one_record_each() -> None:
    rows = parse_text("first plain line\nsecond plain line\n  indented continues\n[Error]: detail continues\nthird\n").to_pylist()
    assert [(r["line"], r["line_count"], r["format"]) for r in rows] == [(1, 1, "text"), (2, 3, "text"), (5, 1, "text")]


PREFIXED = {
    "ray": "(train pid=8464) ",
    "cri": "2025-12-12T12:10:10.644123456Z stderr F ",
    "docker": "2025-12-12T12:10:10.644123456Z ",
    "compose": "trainer-1  | ",
    "mpirun": "[1,3]<stderr>:",
}


@pytest.mark.parametrize("kind", sorted(PREFIXED))
def test_a_prefix_on_every_line_is_stripped_and_kept(kind: str) -> None:
    path = LOGS / "vllm_ascend_4972_EH9999_aicore_timeout_507014.log"
    _need(path)
    text = path.read_text(encoding="utf-8")
    plain = parse_text(text)
    prefixed = parse_text("".join(PREFIXED[kind] + line for line in text.splitlines(keepends=True)))
    keep = ["line", "line_count", "format", "level", "module", "message", "error_codes", "device_id"]
    assert prefixed.select(keep).to_pylist() == plain.select(keep).to_pylist()
    prefixes = prefixed["prefix"].to_pylist()
    assert all(p and p.startswith(PREFIXED[kind].strip()[:6]) for p in prefixes)
    if kind == "ray":
        assert 8464 in prefixed["pid"].to_pylist()


def test_torch_distributed_line_is_its_own_record_and_the_device_is_right() -> None:
    path = LOGS / "vllm_ascend_4972_EH9999_aicore_timeout_507014.log"
    _need(path)
    t = _parse_file(path)
    rows = t.to_pylist()
    dist = next(r for r in rows if r["format"] == "torch_dist")
    assert (dist["line"], dist["line_count"], dist["pid"], dist["level"], dist["module"]) == (6, 1, 285, "ERROR", "torch.distributed")
    assert "ERR02005" not in dist["message"] and dist["error_codes"] == ["507014"]
    kb = load_kb()
    s = summarise(t, triage_table(t, kb), kb)
    assert s["root_cause"]["kb_id"] == "aicore-timeout" and s["root_cause"]["device_ids"] == [4]


def test_vectorised_path_agrees_on_firmware_and_kernel_lines() -> None:
    files = [p for p in _all_log_files() if "real-folders" in str(p)]
    if not files:
        pytest.skip(f"corpus not found at {REAL} (set NPUDIAG_CORPUS)")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    assert both_log_paths_agree(texts, 64) >= 10


def test_knowledge_base_covers_the_fault_classes() -> None:
    kb = load_kb()
    assert len(kb) >= 90
    ids = {e.id for e in kb}
    codes = {c for e in kb for c in e.codes}
    for code in ("EI0009", "507011", "EZ3002", "EZ3003", "EZ0501", "EZ9010", "E19010", "507014", "507015", "507018", "507035"):
        assert code in codes, code
    for need in ("aicore-error-2020", "aicore-illegal-instruction", "aicore-vec-mask-all-zero", "ts-exception", "hbm-uncorrectable-ecc",
                 "hccl-transport-init-error", "opp-verify-failed", "tsch-aicore-exception"):  # fmt: skip
        assert need in ids, need
    assert {e.role for e in kb} == {"device_fault", "cause", "symptom"}
    assert all(e.source for e in kb if e.role == "device_fault" and e.id in ids - _OLD_IDS)


_OLD_IDS = {"aicore-timeout", "aicore-exception", "aicpu-exception", "vector-core-timeout", "vector-core-exception",
            "aicore-ddr-out-of-range", "aivec-ub-out-of-bounds", "aicore-timeout-or-trap", "aicpu-kernel-failed",
            "hccl-task-exception", "hccl-error-cqe"}  # fmt: skip

EVIL = "[bold]x[/bold] [link=http://e.vil]y[/link] \x1b[31mred\x1b]8;;http://e\x1b\\z\x1b]8;;\x1b\\ \x07bell"


def _check_safe(text: str) -> None:
    assert "[bold]x[/bold]" in text and "[link=http://e.vil]y[/link]" in text  # shown, not interpreted
    assert "\x1b[31mred" not in text and "\x1b]8;;http://e" not in text and "\x07" not in text
    assert "\\x1b[31mred" in text


@pytest.mark.slow
def test_input_text_is_never_markup_or_control_sequences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # Rich styles its own text; nothing from the input may add any
    monkeypatch.setenv("COLUMNS", "200")
    log = tmp_path / "plog-1_20250101000000000.log"
    log.write_bytes(
        ("[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:desc=[aicore timeout] " + EVIL + " ErrCode=507014\n").encode()
    )
    o = run("logs", "parse", log, "--out", tmp_path / "lo")
    assert o.code == 0
    _check_safe(o.stdout)
    meta = [
        {"name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
        {"name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
    ]
    ops = [{"name": "Evil" + EVIL, "pid": 1, "tid": 2, "ts": f"{1000 + i * 20}.000", "dur": 10.0, "ph": "X",
            "args": {"Task Type": "AI_CORE"}} for i in range(5)]  # fmt: skip
    for side, scale in (("a", 1.0), ("b", 2.0)):
        d = tmp_path / side
        d.mkdir()
        events = [dict(e, dur=e["dur"] * scale) for e in ops]
        (d / "trace_view.json").write_text(json.dumps(meta + events))
    a = run("analyze", tmp_path / "a" / "trace_view.json", "--out", tmp_path / "oa")
    assert a.code == 0
    _check_safe(a.stdout)
    c = run("compare", tmp_path / "a" / "trace_view.json", tmp_path / "b" / "trace_view.json")
    assert c.code in (0, 1)
    _check_safe(c.stdout)


def test_a_missing_path_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    o = run("logs", "parse", tmp_path / "nope", "--out", tmp_path / "out")
    assert o.code == 2 and not (tmp_path / "out").exists()
    assert o.stdout == "" and len(o.stderr.strip().splitlines()) == 1 and "no such file or folder" in o.stderr


def test_one_bad_path_and_one_good(tmp_path: Path) -> None:
    good = tmp_path / "plog-1_20250101000000000.log"
    good.write_text("[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:rtStreamSynchronize:ErrCode=507014\n")
    o = run("logs", "parse", tmp_path / "nope", good, "--out", tmp_path / "out", "--json")
    assert o.code == 2 and json.loads(o.stdout)["error_codes"][0]["code"] == "507014"
    assert "no such file or folder" in o.stderr


def test_cr_in_a_line_splits_like_the_reader() -> None:
    # a carriage return ends a line for the reader (universal newlines): what follows is a record of its own
    lines = _raw_lines_of("abc ERROR one\rErrCode=507014 two\n")
    t = pa.Table.from_batches(list(LogParser(LogContext("-")).parse(lines)), schema=LOG_EVENTS)
    assert t.num_rows == 2 and "\r" not in "".join(t["message"].to_pylist())


def _raw_lines_of(text: str) -> list[str]:
    return io.StringIO(text, newline="").readlines()


# HCCL's link error table as HcclSocketManager::PrintErrorConnection writes it (the CANN HCCL
# troubleshooting page's example), for two workers: each names its own logical device and rank
_HCCL_HEAD = "[ERROR] HCCL({pid},python3):2026-03-18-10:33:52.113.{us} [hccl_socket_manager.cc:{src}] [{tid}]"
_HCCL_LINES = (
    (403, 797, "[Wait][LinkEstablish]wait socket establish timeout, role[1] rank[{rank}] timeout[120 s]"),
    (454, 861, "[Wait][LinksEstablishCompleted] is failed. ret[9]."),
    (646, 623, "   _________________________LINK_ERROR_INFO___________________________"),
    (650, 624, "   |  comm error, device[{device}]"),
    (
        653,
        626,
        "   |  dest_ip(user_rank)  |   dest_port   |  src_ip(user_rank)   |   src_port   |   MyRole   |   Status   |    TlsStatus   |",
    ),
    (706, 583, "   |  192.0.2.199({peer}) | 16666 | 192.0.3.198({rank}) | 3234403008 | client | time out | DISABLE |"),
)
_HCCL_WORKER = "".join(_HCCL_HEAD.replace("{us}", f"{us:03d}").replace("{src}", str(src)) + text + "\n" for us, src, text in _HCCL_LINES)


def test_hccl_link_errors_name_their_device_and_rank(tmp_path: Path) -> None:
    """Each record of a worker's plog takes the device and rank HCCL states once for the process; the
    root cause names both workers' devices and ranks; recounted here with re from the lines."""
    import re

    logs = tmp_path / "plog"
    logs.mkdir()
    workers = [(17528, 18744, 2, 2, 3), (17529, 18745, 3, 3, 2)]  # pid, tid, device, rank, peer
    for pid, tid, device, rank, peer in workers:
        (logs / f"plog-{pid}_20260318103352113.log").write_text(_HCCL_WORKER.format(pid=pid, tid=tid, device=device, rank=rank, peer=peer))
    texts = [p.read_text() for p in sorted(logs.iterdir())]
    stated = {(int(re.search(r"HCCL\((\d+)", t).group(1)), int(re.search(r"comm error, device\[(\d+)\]", t).group(1)),
               int(re.search(r"rank\[(\d+)\] timeout", t).group(1))) for t in texts}  # fmt: skip
    assert stated == {(pid, device, rank) for pid, _, device, rank, _ in workers}
    assert both_log_paths_agree(texts, 2) >= 1  # the vectorised and the line parser read the same device / rank
    run_ = read_logs(find_sources(str(logs), []), None)
    t = run_.problems
    got = set(zip(t["pid"].to_pylist(), t["device_id"].to_pylist(), t["rank"].to_pylist(), strict=True))
    assert got == stated  # every record of a worker: its device and rank
    kb = load_kb()
    summary = summarise(t, triage_table(t, kb), kb, run_.totals)
    assert summary["root_cause"]["device_ids"] == [2, 3] and summary["root_cause"]["ranks"] == [2, 3]
    assert (summary["first_error"]["device_id"], summary["first_error"]["rank"]) == (2, 2)


def test_the_corpus_hccl_link_error_names_device_0_rank_0() -> None:
    path = CORPUS_ROOT / "logs" / "fixture_mindcluster_faultdiag_plog-59420_20250124110314898.log"
    if not path.is_file():
        pytest.skip(f"corpus not found at {CORPUS_ROOT} (set NPUDIAG_CORPUS)")
    text = path.read_text()
    device = int(text.split("comm error, device[")[1].split("]")[0])
    local = int(text.split("|  124.0.0.11(1)   |   124.0.0.21(")[1].split(")")[0])  # src_ip(rank_id): this rank
    run_ = read_logs(find_sources(str(path), []), None)
    kb = load_kb()
    summary = summarise(run_.problems, triage_table(run_.problems, kb), kb, run_.totals)
    assert summary["root_cause"]["device_ids"] == [device] == [0] and summary["root_cause"]["ranks"] == [local] == [0]


def test_every_finding_names_its_source_and_whose_advice_it_is() -> None:
    """triage.parquet / --json / the terminal: each match says where its facts come from and the release of
    that text; an entry generated from the code catalogue gives the code's own fix where its source has one
    (recounted here from code_advice.toml with the TOML reader) and says "general advice" only where not."""
    files = sorted((CORPUS_ROOT / "logs").glob("*.log"))
    if not files:
        pytest.skip(f"corpus not found at {CORPUS_ROOT} (set NPUDIAG_CORPUS)")
    with resources.as_file(resources.files("npudiag.logs") / "code_advice.toml") as p:
        worded = {c for a in read_toml(Path(p))["advice"] if a.get("fix") for c in a["codes"]}
    kb = load_kb()
    generated = own = seen = 0
    for path in files:
        run_ = read_logs(find_sources(str(path), []), None)
        t = triage_table(run_.problems, kb)
        for f in t.to_pylist():
            seen += 1
            assert f["source"], (path.name, f["kb_id"])
            if f["kb_id"].startswith("code-"):
                generated += 1
                code = f["kb_id"][5:].upper()
                assert f["applies_to"], f
                if code in worded:
                    own += 1
                    assert f["advice"] == "from the source", f
                else:
                    assert f["advice"].startswith("general advice for the "), f
            else:
                assert f["advice"] == "from the source", f
    assert seen > 20 and generated > 0 and own > 0


def test_quiet_records_kept_for_a_device_fault_and_counted_for_a_code(tmp_path: Path) -> None:
    from npudiag.logs.ingest import read_logs
    from npudiag.logs.sources import find_sources

    ts = "2025-03-01-10:00:00.000.{:03d}"
    texts = [
        ("EVENT", "event_id=0x80cb8009, HBM MULTI BIT ECC, uncorrectable", True, False),
        ("INFO", "hbm multi bit ecc seen on chip 0", True, False),  # the fault's words in any case
        ("INFO", "fault ras occurs on device 1", True, False),
        ("INFO", "add error_code E10001 success", False, True),  # the catalogue: counted, not kept
        ("WARNING", "retry E10002 later", True, False),  # a warning is kept when it names a code
        ("WARNING", "retry later", False, False),
        ("DEBUG", "event_id=0x123 (too short to be an event id)", False, False),
        ("INFO", "RunGraph:Run graph 1 success", False, False),
    ]
    lines = [f"[{lv}] DRV(4011,python3):{ts.format(i)} [x.c:{i}]4011 f:{text}" for i, (lv, text, _, _) in enumerate(texts)]
    path = tmp_path / "plog-4011_20250301100000000.log"
    path.write_text("\n".join(lines * 3) + "\n")
    run = read_logs(find_sources(str(path), []), None)
    kept = [text for _, text, keep, _ in texts if keep]
    assert sorted(m.split("f:", 1)[-1] for m in run.problems["message"].to_pylist()) == sorted(kept * 3)
    assert run.totals["info_records_naming_codes"] == 3 * sum(named for *_, named in texts)


def _corpus_problems() -> pa.Table:
    _need(LOGS)
    return read_logs(find_sources(str(LOGS), []), None).problems


def test_entries_match_as_each_pattern_alone_would() -> None:
    # the patterns are narrowed down by halves on the records their alternation matched; the masks must be
    # those of every pattern run on every record by itself (pyarrow's RE2, case-insensitive, as the knowledge
    # base's patterns are written), with the entry's level and module conditions applied here
    import numpy as np
    import pyarrow.compute as pc

    events = _corpus_problems()
    kb = load_kb()
    got = match_entries(events, kb)
    message = pc.fill_null(events["message"], "")
    level = [x or "" for x in events["level"].to_pylist()]
    module = [(x or "").upper() for x in events["module"].to_pylist()]
    codes = events["error_codes"].to_pylist()
    expected = {}
    for e in kb:
        mask = np.array([bool(set(c) & set(e.codes)) for c in codes])
        for p in e.patterns:
            mask |= pc.match_substring_regex(message, p, ignore_case=True).to_numpy(zero_copy_only=False)
        loud = np.array([lv not in QUIET_LEVELS for lv in level])
        mask &= loud | np.array([lv in e.levels for lv in level]) if e.levels else loud
        if e.modules:
            mask &= np.array([m in e.modules for m in module])
        if mask.any():
            expected[e.id] = mask
    assert len(expected) >= 20  # the corpus's faults find many entries
    assert set(got) == set(expected)
    for kb_id, mask in expected.items():
        assert np.array_equal(got[kb_id], mask), kb_id


def test_summary_error_codes_count_every_naming_and_its_first_record() -> None:
    # each code: how many times the error records name it and the first of them in time order, counted here
    # with a plain loop over those records
    events = _corpus_problems()
    kb = load_kb()
    s = summarise(events, triage_table(events, kb), kb)
    errors = [
        r
        for r in events.sort_by(
            [("timestamp", "ascending"), ("timestamp_no_year", "ascending"), ("file", "ascending"), ("line", "ascending")]
        ).to_pylist()
        if r["level"] in ("ERROR", "FATAL") or r["error_codes"]
    ]
    counted: dict[str, dict] = {}
    for r in errors:
        for c in r["error_codes"]:
            row = counted.setdefault(c, {"code": c, "count": 0, "first_file": r["file"], "first_line": r["line"]})
            row["count"] += 1
    assert len(counted) >= 10
    shown = {c["code"]: {k: c[k] for k in ("code", "count", "first_file", "first_line")} for c in s["error_codes"]}
    assert shown == counted
    assert [c["code"] for c in s["error_codes"]] == sorted(counted, key=lambda c: (-counted[c]["count"], c))
