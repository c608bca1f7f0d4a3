from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the real-sample corpus: $NPUDIAG_CORPUS, else ../shared/corpus beside the checkout
CORPUS_ROOT = Path(os.environ.get("NPUDIAG_CORPUS") or ROOT.parent / "shared" / "corpus")
CORPUS = CORPUS_ROOT / "msprof"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"real-sample corpus not present at {CORPUS} (set NPUDIAG_CORPUS; it is in the project workspace)")
    return CORPUS


def corpus_files(pattern: str) -> list[Path]:
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []
