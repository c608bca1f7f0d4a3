"""The HTML report renders in a real headless browser (Debian chromium) and holds the summary."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from npudiag.testing.generate import write_msprof_profile

from .helpers import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def page(tmp_path: Path) -> Path:
    gt = write_msprof_profile(tmp_path / "p", kernels=400, copies=10, seed=4)
    out = tmp_path / "report.html"
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--html", out, "--quiet")
    assert r.returncode == 0, r.stderr
    return out


def test_html_is_self_contained(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "Findings" in text and "sync_copy" in text and "Hot operators by type" in text and "<svg" in text


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)")
def test_html_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    profile_dir = tmp_path / "chromium-profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile_dir}", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Memory copies (10 on the device, 10 host calls)" in dom.stdout and dom.stdout.count("<rect") > 20
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile_dir}", "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.is_file() and shot.stat().st_size > 20_000  # a blank page is a few KB
