"""Mutated real-format input: every reader returns a table or raises InputError, never anything else.

A first, bounded pass (the reliability issue widens it to every reader and more mutations)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npudiag.errors import InputError
from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.trace_json import read_trace
from npudiag.testing.generate import write_msprof_profile

# generated inputs by the thousand
pytestmark = pytest.mark.slow

_SAMPLE: dict[str, bytes] = {}


def _sample(kind: str) -> bytes:
    if not _SAMPLE:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            gt = write_msprof_profile(Path(tmp), kernels=40, copies=3, seed=9)
            mso = Path(gt.profile_dir) / "mindstudio_profiler_output"
            _SAMPLE["csv"] = next(mso.glob("op_summary_*.csv")).read_bytes()
            _SAMPLE["json"] = next(mso.glob("msprof_*.json")).read_bytes()
    return _SAMPLE[kind]


def _mutate(data: bytes, cut: int, flips: list[tuple[int, int]]) -> bytes:
    b = bytearray(data[: max(0, min(cut, len(data)))])
    for pos, val in flips:
        if b:
            b[pos % len(b)] = val
    return bytes(b)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MUTATION = (st.integers(0, 20000), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6))


@SETTINGS
@given(*MUTATION)
def test_kernel_csv_mutations(tmp_path_factory, cut: int, flips: list[tuple[int, int]]) -> None:
    path = tmp_path_factory.mktemp("f") / "op_summary_20260605155140.csv"
    path.write_bytes(_mutate(_sample("csv"), cut, flips))
    try:
        table, _ = read_kernels(path)
    except InputError as exc:
        assert str(path) in exc.one_line()
    else:
        assert table.column_names[:3] == ["source", "rank", "device_id"]


@SETTINGS
@given(*MUTATION)
def test_trace_mutations(tmp_path_factory, cut: int, flips: list[tuple[int, int]]) -> None:
    path = tmp_path_factory.mktemp("f") / "msprof_20260605155140.json"
    path.write_bytes(_mutate(_sample("json"), cut, flips))
    try:
        read_trace(path)
    except InputError as exc:
        assert str(path) in exc.one_line()


@SETTINGS
@given(*MUTATION, st.booleans())
def test_msprobe_dump_mutations(tmp_path_factory, cut: int, flips: list[tuple[int, int]], compare: bool) -> None:
    """msprobe's dump.json, cut and bit-flipped: rows, or one InputError naming the file; the same
    for a statistics compare of the mutated dump against the intact one."""
    import npudiag
    from npudiag.dump.formats.msprobe_json import read_msprobe_dump
    from npudiag.testing.msprobe_dumps import calls, write_dump

    root = tmp_path_factory.mktemp("m")
    path = write_dump(root / "mine", calls(True))
    write_dump(root / "golden", calls(False))
    path.write_bytes(_mutate(path.read_bytes(), cut, flips))
    try:
        rows = read_msprobe_dump(path, scalars=True)
    except InputError as exc:
        assert str(path) in exc.one_line() and "\n" not in exc.one_line()
    else:
        assert all(r["tensor_name"].startswith(r["op_name"]) for r in rows)
    if compare:
        try:
            r = npudiag.compare_dumps(root / "mine", root / "golden")
        except InputError as exc:
            assert "\n" not in exc.one_line()
        else:
            assert all("\n" not in e for e in r.errors)
