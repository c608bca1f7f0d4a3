"""Startup of the CLI: ``npudiag --help``, ``--version`` and one TAB completion, as ratios to
``python -c "import typer, rich"`` measured in the same run (best of N, wall time).

    python bench/bench_startup.py [--repeat 15]

Goal (issue 17): each at most 2x the reference, which means no pandas / pyarrow / numpy at startup.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Typer's own floor: the same Typer release with one command of one Path option. Typer builds a
# pydantic adapter per option when a command's help or completion is shown; npudiag cannot avoid that.
TYPER_FLOOR = """
from pathlib import Path
import typer
app = typer.Typer()
@app.command()
def one(path: Path = typer.Option(None, "--path", help="x")) -> None:
    pass
@app.command()
def two() -> None:
    pass
app()
"""


def best(argv: list[str], env: dict[str, str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    env = {**os.environ, "COLUMNS": "80"}
    py = sys.executable
    ref = best([py, "-c", "import typer, rich"], env, args.repeat)
    floor = Path(tempfile.mkdtemp()) / "floor.py"
    floor.write_text(TYPER_FLOOR)
    cases = {
        "(Typer floor) tiny app one --help": ([py, str(floor), "one", "--help"], env),
        "npudiag --help": ([py, "-m", "npudiag", "--help"], env),
        "npudiag --version": ([py, "-m", "npudiag", "--version"], env),
        "npudiag analyze --help": ([py, "-m", "npudiag", "analyze", "--help"], env),
        "TAB completion": (
            [py, "-m", "npudiag"],
            {**env, "_NPUDIAG_COMPLETE": "complete_bash", "COMP_WORDS": "npudiag an", "COMP_CWORD": "1"},
        ),
        "import pyarrow, pandas (for scale)": ([py, "-c", "import pyarrow, pandas"], env),
    }
    print(f"reference python -c 'import typer, rich': {ref * 1e3:.0f} ms (best of {args.repeat})")
    for name, (argv, e) in cases.items():
        t = best(argv, e, args.repeat)
        print(f"{name:<36} {t * 1e3:6.0f} ms  {t / ref:5.2f}x reference")
    floor.unlink()
    floor.parent.rmdir()


if __name__ == "__main__":
    main()
