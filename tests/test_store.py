"""Output files: atomic replacement, and plain Parquet that needs nothing from npudiag to read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from npudiag import schemas
from npudiag.store import write_table


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "kernels.parquet"
    write_table(pa.table({"a": [1, 2, 3]}), target)
    before = target.read_bytes()

    with pytest.raises(Exception):  # noqa: B017 - any failure inside the writer
        write_table("not a table", target)  # type: ignore[arg-type]
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["kernels.parquet"]


def test_tables_read_back_with_plain_pandas(tmp_path: Path) -> None:
    from npudiag.testing.generate import write_torch_profile

    gt = write_torch_profile(tmp_path / "p", kernels=100, copies=2)
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "npudiag", "analyze", gt.profile_dir, "-o", str(out), "--quiet"], capture_output=True)
    assert r.returncode == 0
    code = (
        "import pandas as pd, sys; "
        "assert 'npudiag' not in sys.modules; "
        f"k = pd.read_parquet({str(out / 'kernels.parquet')!r}); "
        "print(len(k), k['duration_us'].dtype, k['start_us'].dtype)"
    )
    r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["100", "float64", "float64"]


def test_declared_schemas_have_units_in_names() -> None:
    for name, schema in schemas.TABLES.items():
        for field in schema:
            if pa.types.is_floating(field.type) and field.name not in ("variance",):
                assert field.name.endswith(("_us", "_pct", "_bytes", "_gbps", "_mhz", "_tflops", "_per_byte", "_ratio")), (name, field.name)


def test_absent_columns_share_one_zero_buffer_cut_to_each_length() -> None:
    """schemas.nulls: equal to pa.nulls for every type a schema uses, and a small table of them
    pickles small even after a large one was made (a pool worker sends its tables to the parent)."""
    import pickle

    import pyarrow as pa

    from npudiag import schemas

    big = schemas.nulls(2_000_000, pa.int64())
    for field in (f for s in schemas.TABLES.values() for f in s):
        for n in (0, 1, 9, 1000):
            a = schemas.nulls(n, field.type)
            a.validate(full=True)
            assert a.equals(pa.nulls(n, field.type)) and a.null_count == n, field
            assert len(pickle.dumps(a)) <= len(pickle.dumps(pa.nulls(n, field.type))) + 64, field
    # forty absent int64 columns of a large table take the memory of one
    cols = [schemas.nulls(2_000_000, pa.int64()) for _ in range(40)]
    assert {c.buffers()[1].address for c in cols} == {big.buffers()[1].address}
