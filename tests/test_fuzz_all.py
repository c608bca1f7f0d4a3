"""Every reader, fed mutated real-format input: it returns a schema-conforming table (with
warnings) or raises InputError naming the file; never another exception.

Mutations: truncation anywhere, byte flips, a BOM, CRLF line ends, non-UTF-8 bytes, a dropped,
duplicated or swapped column, numbers replaced by NaN / inf / negative / huge values, and the
empty file. Example counts are bounded (SETTINGS) so the suite stays fast; README's Reliability
section gives the totals.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from npudiag import schemas
from npudiag.dump.config import check_dump_config
from npudiag.dump.formats.dump_file import read_dump, tensor_array
from npudiag.dump.ingest import parse_dump_tree
from npudiag.errors import InputError
from npudiag.logs.formats.ascend_log import LogContext
from npudiag.logs.ingest import read_logs
from npudiag.logs.sources import find_sources
from npudiag.profiling.formats.api_statistic import read_api_statistic
from npudiag.profiling.formats.communication import read_communication_tables
from npudiag.profiling.formats.device_info import read_device_info
from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.msprof_db import read_db
from npudiag.profiling.formats.op_statistic import read_op_statistic
from npudiag.profiling.formats.step_trace import read_steps
from npudiag.profiling.formats.trace_json import read_trace
from npudiag.profiling.pipeline import load_gate_config
from npudiag.testing.dump_writer import Tensor, write_dump_file
from npudiag.testing.generate import write_msprof_profile, write_torch_profile
from tests.helpers import parse_text

# generated inputs by the thousand
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXAMPLES = int(os.environ.get("NPUDIAG_FUZZ_EXAMPLES", "40"))  # raise it for a deep local run
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_SAMPLES: dict[str, bytes] = {}

API_STATISTIC = (
    "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
    "0,acl,aclrtMemcpy,4526.28,3,1508.76,20.4,4485.1,4366512.7\n"
    "0,runtime,MemCopySync,4433.1,3,1477.7,15.2,4400.6,4303611.4\n"
)


def _samples() -> dict[str, bytes]:
    if _SAMPLES:
        return _SAMPLES
    with tempfile.TemporaryDirectory() as tmp:
        t = write_torch_profile(Path(tmp) / "t", kernels=60, copies=3, seed=2, steps=3, comm_sizes_mb=[2.0, 64.0])
        m = write_msprof_profile(Path(tmp) / "m", kernels=50, copies=3, seed=2, db=True, device_info=(24, 48))
        tp = Path(t.profile_dir) / "ASCEND_PROFILER_OUTPUT"
        mp = Path(m.profile_dir) / "mindstudio_profiler_output"
        _SAMPLES["kernel_details.csv"] = (tp / "kernel_details.csv").read_bytes()
        _SAMPLES["op_summary_20260605155140.csv"] = next(mp.glob("op_summary_*.csv")).read_bytes()
        _SAMPLES["op_statistic.csv"] = (tp / "op_statistic.csv").read_bytes()
        _SAMPLES["step_trace_time.csv"] = (tp / "step_trace_time.csv").read_bytes()
        _SAMPLES["trace_view.json"] = (tp / "trace_view.json").read_bytes()
        _SAMPLES["msprof_20260605155140.db"] = next(Path(m.profile_dir).glob("msprof_*.db")).read_bytes()
        _SAMPLES["api_statistic.csv"] = API_STATISTIC.encode()
        _SAMPLES["communication.json"] = (tp / "communication.json").read_bytes()
        _SAMPLES["info.json.0"] = (Path(m.profile_dir) / "device_0" / "info.json.0").read_bytes()
        f = Path(tmp) / "MatMul.mm.1.1.1764246877073569"
        write_dump_file(
            f, "mm", [Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)), Tensor(np.ones(3, np.float16))], [Tensor(np.ones(5, np.int64))]
        )
        _SAMPLES["dump"] = f.read_bytes()
    return _SAMPLES


def _csv_mutation(data: bytes, op: str, arg: int) -> bytes:
    lines = data.split(b"\n")
    if op == "drop_col" or op == "dup_col" or op == "swap_col":
        out = []
        for line in lines:
            cells = line.split(b",")
            if len(cells) > 1:
                i = arg % len(cells)
                if op == "drop_col":
                    del cells[i]
                elif op == "dup_col":
                    cells.insert(i, cells[i])
                else:
                    j = (i + 1) % len(cells)
                    cells[i], cells[j] = cells[j], cells[i]
            out.append(b",".join(cells))
        return b"\n".join(out)
    if op == "number":
        bad = [b"nan", b"inf", b"-inf", b"-1", b"1e308", b"99999999999999999999999", b"", b"N/A"][arg % 8]
        out = []
        for k, line in enumerate(lines):
            cells = line.split(b",")
            if k and len(cells) > 2:
                cells[arg % len(cells)] = bad
            out.append(b",".join(cells))
        return b"\n".join(out)
    return data


def _mutate(data: bytes, op: str, arg: int, flips: list[tuple[int, int]]) -> bytes:
    if op == "truncate":
        data = data[: arg % (len(data) + 1)]
    elif op == "bom":
        data = b"\xef\xbb\xbf" + data
    elif op == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif op == "non_utf8":
        pos = arg % (len(data) + 1)
        data = data[:pos] + b"\xff\xfe\xc3" + data[pos:]
    elif op == "empty":
        data = b""
    else:
        data = _csv_mutation(data, op, arg)
    b = bytearray(data)
    for pos, val in flips:
        if b:
            b[pos % len(b)] = val
    return bytes(b)


OPS = st.sampled_from(["truncate", "bom", "crlf", "non_utf8", "empty", "drop_col", "dup_col", "swap_col", "number", "none"])
MUT = (OPS, st.integers(0, 1 << 20), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4))


def _write(tmp_path_factory, name: str, op: str, arg: int, flips) -> Path:
    p = tmp_path_factory.mktemp("f") / name
    p.write_bytes(_mutate(_samples()[name], op, arg, flips))
    return p


def _expect(path: Path, call, check) -> None:
    try:
        result = call(path)
    except InputError as exc:
        assert str(path) in exc.one_line()
    else:
        check(result)


def _conforms(table: pa.Table, schema: pa.Schema) -> None:
    assert table.schema.names[: len(schema)] == schema.names
    for f in schema:
        assert table.schema.field(f.name).type == f.type, f.name


@SETTINGS
@given(st.sampled_from(["kernel_details.csv", "op_summary_20260605155140.csv"]), *MUT)
def test_kernel_csvs(tmp_path_factory, name, op, arg, flips) -> None:
    _expect(_write(tmp_path_factory, name, op, arg, flips), read_kernels, lambda r: _conforms(r[0], schemas.KERNELS))


@SETTINGS
@given(*MUT)
def test_op_statistic(tmp_path_factory, op, arg, flips) -> None:
    _expect(
        _write(tmp_path_factory, "op_statistic.csv", op, arg, flips), read_op_statistic, lambda r: _conforms(r[0], schemas.OP_STATISTIC)
    )


@SETTINGS
@given(*MUT)
def test_api_statistic(tmp_path_factory, op, arg, flips) -> None:
    _expect(
        _write(tmp_path_factory, "api_statistic.csv", op, arg, flips), read_api_statistic, lambda r: _conforms(r[0], schemas.API_STATISTIC)
    )


@SETTINGS
@given(*MUT)
def test_step_trace(tmp_path_factory, op, arg, flips) -> None:
    _expect(_write(tmp_path_factory, "step_trace_time.csv", op, arg, flips), read_steps, lambda r: _conforms(r[0], schemas.STEPS))


@SETTINGS
@given(*MUT)
def test_trace_json(tmp_path_factory, op, arg, flips) -> None:
    def check(t) -> None:
        _conforms(t.tasks, schemas.KERNELS)
        _conforms(t.comm_ops, schemas.KERNELS)
        _conforms(t.comm_tasks, schemas.COMM_TASKS)
        _conforms(t.api_calls, schemas.API_CALLS)
        _conforms(t.steps, schemas.STEPS)
        _conforms(t.torch_ops, schemas.TORCH_OPS)

    _expect(_write(tmp_path_factory, "trace_view.json", op, arg, flips), read_trace, check)


@SETTINGS
@given(*MUT)
def test_communication_json(tmp_path_factory, op, arg, flips) -> None:
    def check(t) -> None:
        _conforms(t["comm_ops"], schemas.COMM_OPS)
        _conforms(t["comm_bandwidth"], schemas.COMM_BANDWIDTH)

    _expect(_write(tmp_path_factory, "communication.json", op, arg, flips), lambda p: read_communication_tables(p, 0)[0], check)


@SETTINGS
@given(*MUT)
def test_device_info(tmp_path_factory, op, arg, flips) -> None:
    _expect(_write(tmp_path_factory, "info.json.0", op, arg, flips), lambda p: read_device_info(p, 0),
            lambda t: _conforms(t, schemas.DEVICE_INFO))  # fmt: skip


@SETTINGS
@given(*MUT)
def test_trace_with_torch_ops(tmp_path_factory, op, arg, flips) -> None:
    """A real torch_npu trace with cpu_op events, task-queue events and torch_to_npu flows (corpus)."""
    from .conftest import CORPUS

    real = CORPUS / "msinsight-pytorch-text-2025" / "level0" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    if not real.is_file():
        return  # the corpus is absent: the generated trace above still runs
    p = tmp_path_factory.mktemp("f") / "trace_view.json"
    p.write_bytes(_mutate(real.read_bytes(), op, arg, flips))
    _expect(p, read_trace, lambda t: _conforms(t.torch_ops, schemas.TORCH_OPS))


@SETTINGS
@given(
    st.sampled_from(["truncate", "none", "empty"]),
    st.integers(0, 1 << 20),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8),
)
@example("none", 0, [(569160, 128)])  # found by the fuzzer: a table name in sqlite_master made non-UTF-8
def test_sqlite_export(tmp_path_factory, op, arg, flips) -> None:
    def check(r) -> None:
        _conforms(r.kernels, schemas.KERNELS)
        _conforms(r.copies, schemas.COPIES)
        _conforms(r.comm_tasks, schemas.COMM_TASKS)
        _conforms(r.api_calls, schemas.API_CALLS)

    _expect(_write(tmp_path_factory, "msprof_20260605155140.db", op, arg, flips), read_db, check)


def test_sqlite_with_missing_and_retyped_columns(tmp_path) -> None:
    p = tmp_path / "msprof_20260605155140.db"
    p.write_bytes(_samples()["msprof_20260605155140.db"])
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE TASK RENAME COLUMN startNs TO start")
    con.execute("UPDATE COMPUTE_TASK_INFO SET blockDim = 'lots'")
    con.commit()
    con.close()
    _expect(p, read_db, lambda r: _conforms(r.kernels, schemas.KERNELS))


@SETTINGS
@given(
    st.sampled_from(["truncate", "none", "empty"]),
    st.integers(0, 1 << 12),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
)
def test_dump_files(tmp_path_factory, op, arg, flips) -> None:
    p = _write(tmp_path_factory, "dump", op, arg, flips)

    def read_all(path: Path) -> list:
        d = read_dump(path)
        return [tensor_array(path, s) for s in d.tensors]

    _expect(p, read_all, lambda arrays: None)
    run = parse_dump_tree(p.parent)
    assert run.table.schema.equals(schemas.TENSORS) and all(str(p) in e for e in run.errors)


@SETTINGS
@given(*MUT)
def test_dump_statistics_csv(tmp_path_factory, op, arg, flips) -> None:
    d = tmp_path_factory.mktemp("s")
    text = (
        b"Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
        b"Nan Count,Negative Inf Count,Positive Inf Count\n"
        b"Output,0,640000,DT_FLOAT,NHWC,4x50x50x16,1.99999,1,1.50004,160000,0,0,0\n"
    )
    f = d / "Add.add_1.5.1.1764246877073569.csv"
    f.write_bytes(_mutate(text, op, arg, flips))
    run = parse_dump_tree(d)
    assert run.table.schema.equals(schemas.TENSORS)
    assert all(str(f) in e for e in run.errors)


@SETTINGS
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(
                        ["dump", "dump_path", "dump_list", "dump_mode", "dump_step", "dump_stats", "dump_data", "layer", "model_name",
                         "dump_op_switch", "dump_debug", "dump_scene", "profiler", "x"]), c, max_size=5), max_leaves=12))  # fmt: skip
def test_acl_json_check_never_raises(tmp_path_factory, value) -> None:
    p = tmp_path_factory.mktemp("a") / "acl.json"
    p.write_text(json.dumps(value))
    problems = check_dump_config(p)[1]
    assert isinstance(problems, list) and all(isinstance(x, str) and x.startswith(str(p)) for x in problems)


@SETTINGS
@given(st.text(max_size=200))
def test_gate_toml_is_a_value_error_naming_the_file_or_a_config(tmp_path_factory, text) -> None:
    p = tmp_path_factory.mktemp("g") / "npudiag-gate.toml"
    p.write_text(text)
    try:
        load_gate_config(p)
    except ValueError as exc:
        assert str(p) in str(exc) or "percentage" in str(exc) or "--steps" in str(exc)


@SETTINGS
@given(st.text(max_size=300), st.sampled_from(["", "[rank3]:", "EZ9999: ", "[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]"]))
def test_log_text_from_scratch(text, prefix) -> None:
    t = parse_text(prefix + text, LogContext("x.log"))
    assert t.schema.equals(schemas.LOG_EVENTS)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["slog/dev-os-0/debug/device-0", "hisi_logs/device-1", "message", "plog", "rank_2/debug/plog"]),
                          st.binary(max_size=300)), min_size=1, max_size=5))  # fmt: skip
def test_export_trees(tmp_path_factory, files) -> None:
    root = tmp_path_factory.mktemp("export")
    for i, (folder, data) in enumerate(files):
        p = root / folder / f"device-{i}_2025010100000000{i}.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    run = read_logs(find_sources(str(root), []), None)
    assert run.problems.schema.equals(schemas.LOG_EVENTS) and run.errors == []
