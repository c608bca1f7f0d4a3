"""The fast trace reader (msgspec pieces, column-wise fill) gives exactly the per-event reader's
tables: on every real trace of the corpus, on the generated ones, cut into many small pieces, and on
hypothesis-made events of every odd type; what it cannot vouch for goes to the per-event reader."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from npudiag.errors import InputError
from npudiag.profiling.formats import trace_events as te
from npudiag.profiling.formats import trace_fast
from npudiag.profiling.formats import trace_json as tj
from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .conftest import CORPUS, corpus_files
from .test_fuzz_all import MUT, _write

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PARTS = ("tasks", "comm_ops", "comm_tasks", "api_calls", "steps", "aicore_freq", "torch_ops", "host_ops", "ranges")


def _per_event(path: Path) -> tj.TraceTables:
    return tj._tables(path, tj._read_events(path, None), 5)


def _fast(path: Path) -> tj.TraceTables:
    return tj._tables(path, trace_fast.read(path, tj._Reading), 5)


def _same(a: tj.TraceTables, b: tj.TraceTables) -> None:
    for part in PARTS:
        x, y = getattr(a, part), getattr(b, part)
        assert x.schema == y.schema, part
        assert x.equals(y), (part, x.num_rows, y.num_rows)
    assert (a.hccl_streams, a.device_ids, a.warnings) == (b.hccl_streams, b.device_ids, b.warnings)


def _traces() -> list[Path]:
    names = ("trace_view*.json", "msprof_*.json", "hccl_*.json", "task_time_*.json", "step_trace_*.json")
    found = [p for n in names for p in corpus_files(f"**/{n}")]
    return found + [p for n in names for p in sorted(FIXTURES.glob(f"**/{n}"))]


@pytest.mark.slow
@pytest.mark.parametrize("path", _traces(), ids=lambda p: "/".join(p.parts[-3:]))
def test_real_traces_take_the_fast_path_and_give_the_same_tables(path: Path, monkeypatch) -> None:
    reference = _per_event(path)
    state = trace_fast.read(path, tj._Reading)
    assert state.pieces["msgspec"] == 0  # every piece read by pyarrow's JSON reader
    _same(tj._tables(path, state, 5), reference)
    # cut into pieces of ~4 KB: state that crosses pieces (process names found later, skipped
    # processes, flows) comes out the same
    monkeypatch.setattr(trace_fast, "PIECE_BYTES", 4096)
    _same(_fast(path), reference)


def test_the_corpus_has_traces(corpus) -> None:
    assert len([p for p in _traces() if str(CORPUS) in str(p)]) >= 10


@pytest.mark.parametrize("kind", ["torch", "msprof"])
def test_generated_profiles_with_every_event_kind(tmp_path: Path, kind: str, monkeypatch) -> None:
    if kind == "torch":
        write_torch_profile(tmp_path, kernels=400, copies=20, seed=4, steps=4, comm_sizes_mb=[2.0, 64.0], dynamic_ops=("Add",))
        paths = list(tmp_path.glob("**/trace_view.json"))
    else:
        write_msprof_profile(tmp_path, kernels=400, copies=20, seed=4)
        paths = list(tmp_path.glob("**/msprof_*.json"))
    assert paths
    monkeypatch.setattr(trace_fast, "PIECE_BYTES", 2048)
    for p in paths:
        _same(_fast(p), _per_event(p))


def test_unsure_inputs_are_read_event_by_event(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(trace_fast, "PIECE_BYTES", 8)  # a cut tried at every '},{'-like spot
    ev = {"ph": "X", "pid": 1, "tid": 2, "ts": "10.000", "dur": 1.0, "name": "k", "args": {"Task Type": "AI_CORE"}}
    meta = {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Ascend Hardware"}}
    cases = {
        "object_form": json.dumps({"traceEvents": [meta, ev]}),
        "string_pid": json.dumps([meta, {**ev, "pid": "1"}]),
        "args_list": json.dumps([meta, {**ev, "args": [1, 2]}]),
        "cut_inside_string": json.dumps([meta, {**ev, "name": "a},{b"}]),
        "number_beyond_a_double": json.dumps([meta, ev]).replace('"dur": 1.0', '"dur": 1e400'),
        "number_item": "[" + json.dumps(meta) + ", 5, " + json.dumps(ev) + "]",
        "trailing_garbage": json.dumps([meta, ev]) + " x",
    }
    for name, text in cases.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text)
        with pytest.raises(trace_fast.Unsure, match=""):
            trace_fast.read(p, tj._Reading)
            pytest.fail(name)
        assert gc.isenabled(), name
        _same(tj.read_trace(p, 5), _per_event(p))


def test_nan_and_infinity_literals_read_as_python_reads_them(tmp_path: Path) -> None:
    meta = {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Ascend Hardware"}}
    for stamps in (["10.000", "11.000", "12.000"], [float("nan"), 11.0, 12.0]):  # ts as text (torch_npu), as numbers (older msprof)
        events = [meta] + [{"ph": "X", "pid": 1, "tid": 2, "ts": ts, "dur": d, "name": "k"}
                           for ts, d in zip(stamps, [float("nan"), float("inf"), 1.0])]  # fmt: skip
        p = tmp_path / "trace_view.json"
        p.write_text(json.dumps(events))  # NaN, Infinity: literals Python's json reads and writes
        _same(_fast(p), _per_event(p))
        assert _per_event(p).warnings  # the NaN and infinite times are dropped, and said


def test_malformed_json_gives_the_per_event_readers_error(tmp_path: Path) -> None:
    p = tmp_path / "msprof_1.json"
    p.write_text('[{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "CANN"}}, {"ph": "X", "pid": 1, "ts": ')
    with pytest.raises(InputError) as exc:
        tj.read_trace(p)
    assert "cut off" in str(exc.value) and str(p) in exc.value.one_line()


_ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "7", " 12 ", "1.5", "-0.500", "1736405443876953.510", "nan", "inf", "x", "17642468770735690.000"]),
)  # fmt: skip
_KEYS = [k for keys in (*te.INT_ARGS.values(), *te.STR_ARGS.values()) for k in keys] + ["correlation_id", "MHz", "name", "labels"]


@st.composite
def _event(draw, tame: bool = False) -> dict:
    ev: dict = {}
    ev["ph"] = draw(st.sampled_from(["X", "X", "X", "M", "s", "f", "C", "i", None]))
    for key, values in (
        ("cat", st.sampled_from([None, "cpu_op", "enqueue", "dequeue", "python_function", "HostToDevice", "async_npu", "kernel", 3])),
        (
            "name",
            st.sampled_from(
                [
                    "process_name",
                    "thread_name",
                    "process_labels",
                    "ProfilerStep#3",
                    "nn.Module: Linear_0",
                    "nn.Module: ",
                    "AI Core Freq",
                    "AscendCL@aclnnAdd",
                    "Node@launch",
                    "Weird@",
                    "@x@y",
                    "Iteration 2",
                    "FP_BP Time 2",
                    "Reduce_2_1",
                    "Notify_Wait",
                    "k",
                    None,
                    7,
                ]
            ),
        ),
        ("pid", st.sampled_from([1, 2, 3]) if tame else st.one_of(st.sampled_from([1, 2, 3]), _ODD)),
        ("tid", st.one_of(st.sampled_from([1, 2]), _ODD)),
        ("ts", st.one_of(st.sampled_from(["10.000", "11.250", "12.5", 13.0, 14]), _ODD)),
        ("dur", st.one_of(st.sampled_from([1.0, 2, 0.5]), _ODD)),
        ("id", st.one_of(st.sampled_from([1, 2, "3"]), _ODD)),
    ):
        if draw(st.integers(0, 5)) or (tame and key == "pid"):
            ev[key] = draw(values)
    if draw(st.integers(0, 4)):
        names = st.sampled_from(
            ["Ascend Hardware", "CANN", "HCCL", "Python", "Overlap Analysis", "Plane 0", "Stream 2", "Step Trace", "NPU 0"]
        )
        ev["args"] = {k: draw(st.one_of(names, _ODD)) for k in draw(st.lists(st.sampled_from(_KEYS), max_size=6))}
    return ev


def _named(pid: int, process: str, threads: dict[int, str]) -> list[dict]:
    meta = [{"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": process}},
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_labels", "args": {"labels": "NPU 0"}}]  # fmt: skip
    return meta + [{"ph": "M", "pid": pid, "tid": t, "name": "thread_name", "args": {"name": n}} for t, n in threads.items()]


# processes 1-3 named as real traces name them (hardware with a step-trace thread, CANN, HCCL with
# a plane), before, after or among the events
_HEADER = _named(1, "Ascend Hardware", {1: "Step Trace", 2: "Stream 2"}) + _named(2, "CANN", {}) + _named(3, "HCCL", {1: "Plane 0"})


@st.composite
def _trace(draw) -> list[dict]:
    tame = draw(st.booleans())
    body = draw(st.lists(_event(tame), min_size=1, max_size=40))
    where = draw(st.sampled_from(["start", "end", "inside", "none"]))
    if where == "start":
        return _HEADER + body
    if where == "end":
        return body + _HEADER
    if where == "inside":
        return body[: len(body) // 2] + _HEADER + body[len(body) // 2 :]
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    _trace(),
    st.sampled_from([", ", ",", ",\n  "]),
    st.sampled_from([64, 300, 8 << 20]),
)
@pytest.mark.slow
def test_any_events_read_the_same_either_way(tmp_path_factory, events, sep, piece) -> None:
    p = tmp_path_factory.mktemp("t") / "trace_view.json"
    p.write_text("[" + sep.join(json.dumps(e) for e in events) + "]")
    saved, trace_fast.PIECE_BYTES = trace_fast.PIECE_BYTES, piece
    try:
        _check_both(p)
    finally:
        trace_fast.PIECE_BYTES = saved


def _check_both(p: Path) -> None:
    try:
        reference = _per_event(p)
    except InputError as exc:
        with pytest.raises(InputError) as again:
            tj.read_trace(p)
        assert again.value.one_line() == exc.one_line()
        return
    _same(tj.read_trace(p, 5), reference)
    try:
        fast = _fast(p)
    except trace_fast.Unsure:
        return
    _same(fast, reference)


def test_bytes_that_are_not_utf8_anywhere_give_the_per_event_readers_error(tmp_path: Path) -> None:
    # pyarrow's JSON reader lets invalid UTF-8 inside strings through; the fast path must not
    meta = {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Ascend Hardware"}}
    ev = {"ph": "X", "pid": 1, "tid": 2, "ts": "10.000", "dur": 1.0, "name": "kNAME", "args": {"Task Type": "AI_CORE", "other": "OTHER"}}
    text = json.dumps([meta, ev]).encode()
    for marker in (b"NAME", b"OTHER"):  # in a field read, in one ignored
        p = tmp_path / f"{marker.decode()}.json"
        p.write_bytes(text.replace(marker, b"\x80"))
        with pytest.raises(InputError, match="not UTF-8 text"):
            tj.read_trace(p)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(*MUT)
@example(op="truncate", arg=12342, flips=[(791, 128)])  # a 0x80 in a ts string: seen by a thread preparing ahead
def test_mutated_real_traces_read_the_same_either_way(tmp_path_factory, op, arg, flips) -> None:
    """Byte flips, truncation, BOM, CRLF... of a generated torch_npu trace: the reader used
    (pyarrow / msgspec / per event) never changes the tables or the error."""
    p = _write(tmp_path_factory, "trace_view.json", op, arg, flips)
    saved, trace_fast.PIECE_BYTES = trace_fast.PIECE_BYTES, 4096
    try:
        _check_both(p)
    finally:
        trace_fast.PIECE_BYTES = saved


def test_pieces_prepared_ahead_stop_with_the_reader(tmp_path: Path, monkeypatch) -> None:
    """Pieces are parsed on two threads ahead of the state (the process's kept pool); a late piece that
    sends the file to the per-event reader leaves no work of the file behind: every piece it started is
    done or cancelled when the reader returns. Progress counts every byte once, in order."""
    submitted: list = []

    class Recording:
        def __init__(self, pool) -> None:
            self.pool = pool

        def submit(self, *a):
            f = self.pool.submit(*a)
            submitted.append(f)
            return f

    real_threads = trace_fast.threads
    monkeypatch.setattr(trace_fast, "threads", lambda *a: Recording(real_threads(*a)))

    meta = {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Ascend Hardware"}}
    ev = {"ph": "X", "pid": 1, "tid": 2, "ts": "10.000", "dur": 1.0, "name": "k", "args": {"Task Type": "AI_CORE"}}
    events = [meta] + [{**ev, "ts": f"{10 + i}.000"} for i in range(2000)]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(events))
    bad = tmp_path / "bad.json"
    bad.write_bytes(json.dumps(events).encode().replace(b'"ts": "1990.000"', b'"ts": "1990.000", "x": "\x80"'))
    monkeypatch.setattr(trace_fast, "PIECE_BYTES", 4096)
    seen: list[int] = []
    state = trace_fast.read(good, tj._Reading, seen.append)
    assert sum(seen) == good.stat().st_size and state.pieces["arrow"] > 10
    tables = tj._tables(good, state, 5)
    _same(tables, _per_event(good))
    # and against the raw file, read with the json module: each X event of the hardware process is
    # a task, its ts text the exact start in ns
    raw = [e for e in json.loads(good.read_text()) if e["ph"] == "X" and e["pid"] == 1]
    tasks = tables.tasks.sort_by("start_ns")
    assert tasks.num_rows == len(raw) == 2000
    assert tasks["start_ns"].to_pylist() == sorted(int(e["ts"].replace(".", "")) for e in raw)
    assert sum(tasks["duration_us"].to_pylist()) == sum(e["dur"] for e in raw)
    assert set(tasks["task_type"].to_pylist()) == {e["args"]["Task Type"] for e in raw}
    submitted.clear()
    with pytest.raises(trace_fast.Unsure):
        trace_fast.read(bad, tj._Reading)
    assert len(submitted) > 3 and all(f.done() for f in submitted), [f for f in submitted if not f.done()]


def test_an_enqueue_or_step_of_1e305_us_is_no_crash(tmp_path: Path) -> None:
    """Hypothesis found an enqueue event of dur 1.8e305 µs: its end in ns overflowed (OverflowError, a
    traceback) on both paths. Such an enqueue is dropped, as every event longer than 1e12 µs is; a step
    range that long would keep its start and µs end, with no exact ns end."""
    events = [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "cat": "enqueue", "pid": 1, "tid": 3, "name": "Enqueue", "ts": "10.000", "dur": 1.797693134862316e305,
         "args": {"correlation_id": 7}},
        {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 3, "name": "ProfilerStep#3", "ts": "1.000", "dur": 1.797693134862316e305},
    ]  # fmt: skip
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(events))
    _check_both(p)  # both paths read it, and read it the same
    assert tj.read_trace(p, 5).torch_ops.num_rows == 0  # the enqueue led nowhere: nothing credited through it
