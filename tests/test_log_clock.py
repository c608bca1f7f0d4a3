"""Logs as a user reads them: device records in host time where the device writes another time zone,
the fault kernel named, paths broken between their parts. Recomputed from the raw files with re."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from .conftest import CORPUS
from .helpers import run_cli

LOGS = CORPUS.parent / "logs" / "real-folders"


@pytest.fixture
def logs_corpus() -> Path:
    if not LOGS.is_dir():
        pytest.skip(f"the log corpus is not at {LOGS} (set NPUDIAG_CORPUS)")
    return LOGS


def _stamp(text: str) -> datetime:
    """A plog/slog time stamp, 2020-12-23-17:10:54.083.518."""
    d, hms, ms, us = re.match(r"(\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3})", text).groups()
    return datetime.strptime(f"{d} {hms}", "%Y-%m-%d %H:%M:%S") + timedelta(microseconds=int(ms) * 1000 + int(us))


def test_device_records_in_another_time_zone_are_shown_in_host_time(logs_corpus: Path, tmp_path: Path) -> None:
    """The 2020 msnpureport export: the device fault at 17:10 and the host's report of it at 01:10
    the next day read as 8 hours apart."""
    export = logs_corpus / "oamtools-msnpureport-2020"
    (dev,) = export.rglob("device-0_20201224011054112.log")
    first = _stamp(re.search(r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3}", dev.read_text(errors="replace")).group(0))
    named = datetime.strptime("20201224011054112"[:14], "%Y%m%d%H%M%S") + timedelta(milliseconds=112)
    offset = round((named - first) / timedelta(minutes=15)) * timedelta(minutes=15)
    assert offset == timedelta(hours=8)
    r = run_cli("logs", "parse", export, "--out", tmp_path / "o", "--json")
    assert r.returncode in (0, 1), r.stderr
    s = json.loads(r.stdout)
    (moved,) = s["clock_offsets"]
    assert moved["file"].endswith("device-0_20201224011054112.log") and moved["offset_s"] == 8 * 3600
    root = s["root_cause"]
    assert root["first_file"].endswith("device-0_20201224011054112.log")
    assert root["first_timestamp"] == (first + offset).strftime("%Y-%m-%d %H:%M:%S.%f")
    # now the device fault comes just before the host runtime's report of it, as it happened
    (plog,) = [p for p in export.rglob("plog_20201224011051563.log")]
    host = [_stamp(m.group(0)) for m in re.finditer(r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3}", plog.read_text(errors="replace"))]
    assert min(host) <= first + offset <= max(host)
    # the files whose names and records agree are left alone
    agree = ("device-os_19700101080014782.log", "device-10043_20210331185942505.log")
    assert not any(o["file"].endswith(agree) for o in s["clock_offsets"])


def test_the_fault_kernel_is_named_and_paths_break_between_parts(logs_corpus: Path, tmp_path: Path) -> None:
    """The asys export names 'fault kernel_name=FlashAttentionScore_…_mix_aic'; the panel said
    "Take fault kernel_name from…"."""
    export = logs_corpus / "oamtools-asys-2024"
    names = {m.group(1) for p in export.rglob("*.log") for m in re.finditer(r"fault kernel_name=([^,\s]+)", p.read_text(errors="replace"))}
    assert any(n.startswith("FlashAttentionScore_") and n.endswith("_mix_aic") for n in names)
    r = run_cli("logs", "parse", export, "--out", tmp_path / "o", "--json")
    s = json.loads(r.stdout)
    assert {k["kernel_name"] for k in s["fault_kernels"]} == names
    for width in (60, 80, 120):
        text = run_cli("logs", "parse", export, "--out", tmp_path / "o", env={"COLUMNS": str(width)}).stdout
        flat = re.sub(r"[│╭╮╰╯─ ]+\n[│ ]*", "\n", text)
        assert "fault kernel:" in text
        for n in names:  # the name whole, perhaps folded at the panel's edge, never cut with an ellipsis
            assert n in text.replace("\n", "").replace("│", "").replace(" ", "") and "…" not in n
        # each folder name of the first-seen path is whole on its line
        for part in ("oamtools-asys-2024", "asys_output_20240912164014957", "invalid-tiling-test.log:3"):
            assert part in flat, (width, part)
