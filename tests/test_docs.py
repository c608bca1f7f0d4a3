"""Every Python block of README.md and docs/*.md runs, from a folder laid out as the README says:
the bundled samples under fixtures/, a generated two-rank job/ analysed into npudiag-out/job."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import npudiag
from npudiag.testing.generate import main as generate

from .conftest import ROOT

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            out.append((page.name, text[: m.start()].count("\n") + 1, m.group(1)))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "fixtures", d / "fixtures")
    generate(["--kind", "torch", "--ranks", "2", "--kernels", "300", "--copies", "4", "--out", str(d / "job")])
    npudiag.analyze([d / "job"], d / "npudiag-out" / "job")
    return d


def test_the_docs_have_python_blocks() -> None:
    blocks = _blocks()
    assert any(b[0] == "README.md" for b in blocks) and len(blocks) >= 3


@pytest.mark.parametrize(("page", "line", "code"), _blocks(), ids=[f"{p}:{n}" for p, n, _ in _blocks()])
def test_python_block_runs(page: str, line: int, code: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__docs__"})  # noqa: S102 - our own documentation


def test_cli_reference_is_generated_and_complete() -> None:
    """docs/cli.md, tables.md and rules.md are what scripts/gen_reference.py writes today; cli.md names
    every command of the app, tables.md every table, rules.md every rule and option."""
    import subprocess
    import sys

    script = ROOT / "scripts" / "gen_reference.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    import typer

    from npudiag.cli import app

    text = (ROOT / "docs" / "cli.md").read_text()
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        assert f"\n## npudiag {name}\n" in text
        for sub in getattr(cmd, "commands", {}):
            assert f"\n## npudiag {name} {sub}\n" in text


def _anchor(heading: str) -> str:
    t = re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower())
    return t.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(_anchor(line))
    return out


def test_links_between_the_pages_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists, and a heading in it."""
    bad = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                bad.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{page.name}: {target} (no such heading)")
    assert not bad, bad


def test_readme_is_short_and_its_outputs_are_current() -> None:
    """The README stays a first-ten-minutes page; the outputs it shows are the generated capture's."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    capture = (ROOT / "docs" / "cli-80-columns.txt").read_text(encoding="utf-8")
    shown = re.findall(r"^```text\n(\$ npudiag .*?)^```", text, re.S | re.M)
    assert shown
    for block in shown:
        lines = [x for x in block.splitlines() if not x.startswith("...  (")]
        assert "\n".join(lines) in capture

    from npudiag import schemas
    from npudiag.profiling.rules import RULES

    tables = (ROOT / "docs" / "tables.md").read_text()
    for name, schema in schemas.TABLES.items():
        assert f"\n## {name}.parquet\n" in tables
        assert all(f"| `{f.name}` | {f.type} |" in tables for f in schema)
    rules = (ROOT / "docs" / "rules.md").read_text()
    for m in RULES:
        assert f"\n## {m.RULE_ID}\n" in rules and m.MSPROF_ANALYZE in rules
        assert all(f"`{k}=" in rules for k in m.OPTIONS)
