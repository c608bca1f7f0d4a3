"""Format quirks, shown on real rows from the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.msprof_db import read_db
from npudiag.testing.generate import write_msprof_profile


def test_cann8_kernel_details_quirks(corpus: Path) -> None:
    t, warnings = read_kernels(corpus / "mstt-advisor-kernel-details-cann8/kernel_details.csv", rank=3)
    row = t.to_pylist()[0]
    assert warnings == []
    assert row["source"] == "kernel_details" and row["rank"] == 3
    assert row["step"] == 19
    assert row["model_id"] is None  # 4294967295 means "no model"
    assert row["start_us"] == pytest.approx(1736413971558972.912)  # "...912\t" with the TAB stripped
    assert row["input_shapes"] == "81920,4096;8192,512"  # triple quotes removed
    assert row["op_type"] == "MatMulV2" and row["task_type"] == "AI_CORE"
    assert row["op_state"] == "dynamic" and row["hf32_eligible"] == "NO"
    assert row["block_dim"] == 16 and row["wait_us"] == 1.087
    assert row["context_id"] is None  # N/A
    assert row["aic_mte2_ratio"] == 0.964  # metric columns kept, names normalised
    assert row["cube_utilization_pct"] == 79.295


def test_op_summary_names_and_na(corpus: Path) -> None:
    t, _ = read_kernels(corpus / "msinsight-server-testdata/test_kernel_parse/op_summary_1.csv")
    rows = t.to_pylist()
    hccl = rows[1]
    assert hccl["task_type"] == "HCCL" and hccl["task_id"] is None and hccl["stream_id"] is None
    assert hccl["duration_us"] == 4975.2664
    assert "aic_l0a_read_bw_gbps" in t.column_names


def test_level0_kernel_details_without_types(corpus: Path) -> None:
    t, _ = read_kernels(corpus / "msinsight-pytorch-text-2025/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    row = t.to_pylist()[0]
    assert row["op_type"] is None and row["task_type"] is None  # Level0 writes N/A
    assert row["op_name"] == "trans_TransData_0" and row["step"] == 50


def test_task_time_csv(corpus: Path) -> None:
    path = next((corpus / "neopan-tilelang-baseline-PROF_000001_20260605155111872_JDEKRCNERPBNJEGA").glob("task_time_*.csv"))
    t, _ = read_kernels(path)
    rows = t.to_pylist()
    assert rows[1]["task_type"] == "TASK_TIMEOUT_SET" and rows[1]["duration_us"] == 81.4
    assert rows[1]["stream_id"] == 1404 and rows[1]["task_id"] == 5
    assert "task_stop_us" not in t.column_names


def test_db_reader_on_generated_export(tmp_path: Path) -> None:
    import sqlite3

    gt = write_msprof_profile(tmp_path, kernels=200, copies=5, db=True, text=False)
    db = next(Path(gt.profile_dir).glob("msprof_*.db"))
    t = read_db(db, rank=0)
    assert t.warnings == []
    assert t.kernels.num_rows == gt.kernels  # compute kernels and one row per communication op
    assert t.copies.num_rows == 5 and set(t.copies["direction"].to_pylist()) == {"H2D"}
    assert t.api_calls.num_rows == t.kernels.num_rows + 5 and set(t.api_calls["level"].to_pylist()) <= {"acl", "communication"}
    # recomputed with sqlite3 alone: device time per op type of the compute tasks and the comm ops
    con = sqlite3.connect(db)
    sid = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    raw: dict[str, float] = {}
    for op_type, ns in con.execute("SELECT c.opType, t.endNs - t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)"):
        raw[sid[op_type]] = raw.get(sid[op_type], 0.0) + ns / 1e3
    for op_type, ns in con.execute("SELECT opType, endNs - startNs FROM COMMUNICATION_OP"):
        raw[sid[op_type]] = raw.get(sid[op_type], 0.0) + ns / 1e3
    con.close()
    by_type: dict[str, float] = {}
    for r in t.kernels.to_pylist():
        by_type[r["op_type"]] = by_type.get(r["op_type"], 0.0) + r["duration_us"]
    assert by_type.keys() == raw.keys()
    for op, v in raw.items():
        assert by_type[op] == pytest.approx(v, abs=1e-6)


def test_exact_timestamps_from_text_fast_and_general_paths_agree() -> None:
    """CSV timestamp text to exact ns: the fast path (every value 'digits.ddd') and the general one
    give the same numbers, and a value whose ns do not fit int64 is null, never wrapped around."""
    import pyarrow as pa

    from npudiag.profiling.formats import csvtext

    class Text:
        def __init__(self, values: list[str | None]) -> None:
            self.table = pa.table({"t": pa.chunked_array([pa.array(values, pa.string())])})

    fast = ["1764246877073569.640\t", "-0.500", "-1.500", "0001.000", "8999999999999999.999", None, " 12.345 "]
    want = [1764246877073569640, -500, -1500, 1000, 8999999999999999999, None, 12345]
    assert csvtext.to_ns(Text(fast), "t").to_pylist() == want
    general = [*fast, "1.5", "17642468770735690.000", "-9999999999999999.000"]  # not all 'digits.ddd': the general path
    assert csvtext.to_ns(Text(general), "t").to_pylist() == [*want, 1500, None, None]


def test_unusable_bandwidth_figures_keep_the_op_times(tmp_path: Path) -> None:
    """communication.json: an op whose Communication Bandwidth Info is not usable keeps its times
    (comm_ops) and the other ops' figures; a warning names the file and counts the op."""
    import json

    from npudiag.profiling.formats.communication import read_communication_tables

    ok = {"Transit Size(MB)": 32.0, "Transit Time(ms)": 2.0, "Bandwidth(GB/s)": 16.0, "Large Packet Ratio": 1.0}
    times = {"Start Timestamp(us)": 1.0, "Elapse Time(ms)": 2.5, "Transit Time(ms)": 2.0, "Wait Time(ms)": 0.5,
             "Synchronization Time(ms)": 0, "Idle Time(ms)": 0}  # fmt: skip
    data = {"step1": {"p2p": {}, "collective": {
        "a@1": {"Communication Time Info": times, "Communication Bandwidth Info": {"SDMA": ok}},
        "b@1": {"Communication Time Info": times, "Communication Bandwidth Info": {"SDMA": {**ok, "Transit Size(MB)": "N/A"}}},
    }}}  # fmt: skip
    f = tmp_path / "communication.json"
    f.write_text(json.dumps(data))
    tables, warnings = read_communication_tables(f, 0)
    assert tables["comm_ops"]["op_name"].to_pylist() == ["a@1", "b@1"]
    assert tables["comm_bandwidth"]["op_name"].to_pylist() == ["a@1"] and tables["comm_bandwidth"]["size_bytes"].to_pylist() == [32_000_000]
    assert len(warnings) == 1 and str(f) in warnings[0] and "1 op(s)" in warnings[0]


def test_device_info_frequency_forms(tmp_path: Path) -> None:
    import json

    from npudiag.profiling.formats.device_info import read_device_info

    f = tmp_path / "info.json.0"
    f.write_text(json.dumps({"DeviceInfo": [{"id": 0, "ai_core_num": 24, "aiv_num": 48, "aic_frequency": "1800.0"}]}))
    assert read_device_info(f, 0).to_pylist()[0] | {"rank": 0} == {"rank": 0, "device_id": 0, "ai_core_num": 24, "aiv_num": 48,
                                                                 "ai_cpu_core_num": None, "aic_frequency_mhz": 1800.0}  # fmt: skip
