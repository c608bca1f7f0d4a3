"""Every Python block of README.md and docs/*.md runs, from a folder laid out as the README says:
the bundled samples under fixtures/, a generated two-rank job/ analysed into npudiag-out/job."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

import npudiag
from npudiag.testing.generate import main as generate

from .conftest import ROOT

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KERNELS = "fixtures/sample_torch/npudiag-host_2647914_20251127192734000_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


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


@pytest.mark.slow
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


# (page, quantity): where a page states a quantity's formula, it is the glossary's, word for word
DOCUMENTED_FORMULAS = [
    ("docs/gate.md", "device_busy_us"), ("docs/gate.md", "copy_not_overlapped_us"), ("docs/gate.md", "free_us"),
    ("docs/gate.md", "step_time_us"),
    ("docs/analyze.md", "device_busy_us"), ("docs/analyze.md", "span_us"),
]  # fmt: skip


def test_each_documented_formula_is_the_glossarys() -> None:
    """analyze.md said busy was the union of kernel intervals and gate.md computing + communication
    not overlapped; the code computes neither."""
    from npudiag.profiling.analysis.quantities import GLOSSARY

    for page, key in DOCUMENTED_FORMULAS:
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        assert GLOSSARY[key] in text, f"{page} does not state {key} as the glossary does: {GLOSSARY[key]}"
    gate = (ROOT / "docs" / "gate.md").read_text(encoding="utf-8")
    assert "computing + communication not overlapped (mean" not in gate
    assert "union of kernel intervals" not in (ROOT / "docs" / "analyze.md").read_text(encoding="utf-8")


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
    from npudiag.profiling.rules import rules as registered_rules

    tables = (ROOT / "docs" / "tables.md").read_text()
    for name, schema in schemas.TABLES.items():
        assert f"\n## {name}.parquet\n" in tables
        assert all(f"| `{f.name}` | {f.type} |" in tables for f in schema)
    rules = (ROOT / "docs" / "rules.md").read_text()
    for m in registered_rules().values():
        assert f"\n## {m.rule_id}\n" in rules and m.msprof_analyze in rules
        assert all(f"`{k}=" in rules for k in m.options)


# -- every npudiag command shown in README.md and docs/*.md runs on the bundled samples ---------------

# placeholders of the prose, each the workspace item it stands for (npudiag.testing.workspace)
PLACEHOLDERS = {
    "PATH...": "fixtures/sample_torch", "FILE": KERNELS, "DIR": "cluster_prof", "OUT": "npudiag-out/job",
    "BASELINE": "fixtures/sample_torch", "CURRENT": "fixtures/sample_torch", "A": "fixtures/sample_torch",
    "B": "fixtures/sample_torch", "MINE": "dump", "GOLDEN": "golden", "DUMP_PATH": "dump", "APP": "python", "ARGS": "train.py",
}  # fmt: skip
PLACEHOLDER_IN = {("logs", "parse"): {"PATH...": "ascend/log"}, ("sql", "OUT"): {"QUERY": "SELECT count(*) FROM kernels"}}
# what cannot run here: a Dask scheduler's address
PARSE_ONLY = re.compile(r"tcp://HOST:PORT|--scheduler \.\.\.")
EXIT = {"doctor": {0, 1}, "dump compare": {1}}  # no CANN here; the workspace's dump drifts from op 3 on
# what CANN does in the env and acl.json methods: the application itself writes the PROF_* folder
APP = """#!{python}
import json, os, sys
from pathlib import Path
from npudiag.testing.generate import write_msprof_profile
opts = os.environ.get("PROFILING_OPTIONS")
if opts:
    out = json.loads(opts)["output"]
else:
    out = json.loads(Path("acl.json").read_text()).get("profiler", {{}}).get("output")
if out:
    write_msprof_profile(Path(out) / f"PROF_000001_20260605155111872_DOCSAPP{{os.getpid():010d}}", kernels=100, seed=2, copies=1)
"""


def _shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every npudiag command in a code span or a shell line of a code block, in page
    order; the generated cli.md is left to its own test."""
    found = []
    for page in PAGES:
        if page.name == "cli.md":
            continue
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```|`(npudiag [^`\n]+)`", text, re.S | re.M):
            if m.group(3):
                found.append((page.name, m.group(3).replace("\\|", "|")))
            elif m.group(1) != "python":
                for line in m.group(2).splitlines():
                    cmd = re.sub(r"^\s*(\$ |- |run: |pip install \. && )", "", line.strip())
                    if cmd.startswith("npudiag ") and not re.match(r"npudiag \S+ +\S+ +(->|·)|npudiag \S+  ", cmd):
                        found.append((page.name, cmd))
    return found


def _argv(command: str) -> tuple[list[str], set[int]]:
    """The argv a shown command runs with (placeholders filled in), and the exit codes it may end with."""
    code = re.search(r"#\s*exit (\d+)", command)
    words = shlex.split(command.split("|")[0], comments=True)
    words = [w for w in words if w not in ("[OPTIONS]", "...")]
    sub = tuple(words[1:3])
    fill = {**PLACEHOLDERS, **PLACEHOLDER_IN.get(sub, {})}
    argv = [os.path.expandvars(fill.get(w, w)) for w in words[1:]]
    name = " ".join(w for w in argv[:2] if not w.startswith("-") and w in COMMAND_WORDS)
    return argv, {int(code.group(1))} if code else EXIT.get(name, {0})


COMMAND_WORDS = {"analyze", "report", "compare", "gate", "cluster", "profile", "doctor", "logs", "parse", "export", "level", "dump",
                 "check", "sql"}  # fmt: skip


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    import sys

    from npudiag.testing.workspace import build_workspace

    from .helpers import STANDIN_BIN, msprof_standin_path

    root = build_workspace(tmp_path_factory.mktemp("shown"), ROOT / "fixtures")
    for name in ("app", "infer"):
        (root / name).write_text(APP.format(python=sys.executable))
        (root / name).chmod(0o755)
    # the CI examples' baseline, stored as docs/gate.md says (an analyze --out folder), and a fresh profile
    npudiag.analyze([root / "fixtures" / "sample_torch"], root / "perf" / "baseline")
    shutil.copytree(ROOT / "fixtures" / "sample_torch", root / "prof")
    npudiag.analyze([root / "cluster_prof"], root / "npudiag-out" / "job")
    env = msprof_standin_path(root / "bin")
    env["PATH"] = f"{root / 'pybin'}{os.pathsep}{STANDIN_BIN}{os.pathsep}{env['PATH']}"
    return root, {**env, "HOME": str(root), "COLUMNS": "80", "GITHUB_STEP_SUMMARY": "summary.md"}


@pytest.mark.slow
def test_every_command_shown_in_the_docs_runs(ws: tuple[Path, dict[str, str]]) -> None:
    """Each command of README.md and docs/ runs on the bundled samples and ends with the exit code it
    is shown with (0 unless the page says otherwise); a bare command name must be a real command;
    a Dask address, which cannot exist here, is only parsed. Pages are run in order, so a page may
    use what an earlier command of it wrote (dump check reads the acl.json the dump example wrote)."""
    import typer

    from npudiag.cli import app

    from .helpers import run_cli

    root, env = ws
    shown = _shown_commands()
    assert len(shown) >= 40
    ran, bad = 0, []
    for page, command in shown:
        argv, codes = _argv(command)
        if all(w in COMMAND_WORDS for w in argv):  # a command named in the prose: it must exist
            argv, codes = [*argv, "--help"], {0}
        if PARSE_ONLY.search(command):  # every option and argument must parse
            cmd, args = typer.main.get_command(app), _argv(command.replace("--scheduler ...", "--scheduler tcp://HOST:PORT"))[0]
            while args and args[0] in getattr(cmd, "commands", {}):
                cmd = cmd.commands[args.pop(0)]
            cmd.make_context(cmd.name, args)  # raises on an unknown option or a bad value
            continue
        r = run_cli(*argv, cwd=root, env=env)
        ran += 1
        if r.returncode not in codes or "Traceback" in r.stderr:
            bad.append(f"{page}: {command} -> exit {r.returncode}: {r.stderr.strip()[-300:]}")
    assert not bad, "\n".join(bad)
    assert ran >= 35
