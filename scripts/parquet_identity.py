"""Fingerprint every Parquet file npudiag writes for a fixed set of inputs, to show that a change of
structure changed no output byte.

    python scripts/parquet_identity.py --work /tmp/id-before > before.txt    # on the old code
    python scripts/parquet_identity.py --work /tmp/id-after > after.txt      # on the new code
    diff before.txt after.txt && echo identical

The inputs: every corpus profile (``$NPUDIAG_CORPUS/msprof/*``, each analysed alone, and the
4-rank run through ``cluster``), the bundled samples (``fixtures/``), and generated bench-shaped
inputs (one torch_npu rank of 100 k kernels, an msprof profile with a .db, 4 ranks of 5 k kernels
analysed rank by rank). Each command runs as ``python -m npudiag`` with the checkout given by
``--code`` first on ``sys.path``, so the same script measures an old worktree. One line per Parquet
file: its sha256 and its path under the command's out folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code: Path, args: list[str], cwd: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(code)}
    return subprocess.run([sys.executable, "-m", "npudiag", *args], cwd=cwd, env=env, capture_output=True).returncode


def _generate(work: Path) -> list[tuple[str, list[str]]]:
    from npudiag.testing.generate import write_msprof_profile, write_torch_profile

    gen = work / "generated"
    if not gen.exists():
        write_torch_profile(gen / "torch100k", 100_000, 7, copies=200)
        write_msprof_profile(gen / "msprof_db", 20_000, 3, db=True)
        for rank in range(4):
            write_torch_profile(gen / "ranks4", 5_000, 11 + rank, rank=rank)
    return [("gen-torch100k", [str(gen / "torch100k")]), ("gen-msprof-db", [str(gen / "msprof_db")]),
            ("gen-ranks4", [str(gen / "ranks4")])]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="a scratch folder for the out folders")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose npudiag runs (default: this one)")
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("NPUDIAG_CORPUS", ROOT.parent / "shared" / "corpus")))
    a = ap.parse_args()
    work = a.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[str, list[str]]] = []
    for p in sorted((a.corpus / "msprof").glob("*")):
        if p.is_dir():
            jobs.append((f"corpus-{p.name}", [str(p)]))
    for p in sorted((ROOT / "fixtures").glob("sample_*")):
        jobs.append((f"fixture-{p.name}", [str(p)]))
    jobs += _generate(work)
    for name, inputs in jobs:
        out = work / "out" / name
        rc = _run(a.code, ["analyze", *inputs, "--out", str(out), "--force", "--quiet"], work)
        print(f"# analyze {name}: exit {rc}")
    four = a.corpus / "msprof" / "msinsight-st-cann83rc1-level2-4rank"
    for name, path in (("cluster-corpus-4rank", four), ("cluster-gen-ranks4", work / "generated" / "ranks4")):
        if path.exists():
            rc = _run(a.code, ["cluster", str(path), "--out", str(work / "out" / name), "--force", "--quiet"], work)
            print(f"# cluster {name}: exit {rc}")
    for f in sorted((work / "out").rglob("*.parquet")):
        print(hashlib.sha256(f.read_bytes()).hexdigest(), f.relative_to(work / "out"))
    # what each input was used for, and what was said: the manifest minus times, hashes and paths of this run
    for f in sorted((work / "out").rglob("manifest.json")):
        m = json.loads(f.read_text())
        used = sorted((i["path"].replace(str(work), "WORK"), i["kind"], i["used_for"], i["error"]) for i in m.get("inputs", []))
        said = [w.replace(str(work), "WORK") for w in m.get("warnings", []) + m.get("errors", [])]
        rules = m.get("rules", {})
        print("manifest", f.relative_to(work / "out"), json.dumps([used, said, m.get("row_counts"), rules], sort_keys=True))


if __name__ == "__main__":
    main()
