"""The typed summary every renderer reads (npudiag.summary_model) holds every key the summary dict has:
a field the producer adds without a place in the model would be invisible to the renderers."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pyarrow as pa
import pytest
from rich.console import Console

import npudiag
from npudiag.report.html import render_html
from npudiag.report.markdown import render_markdown
from npudiag.report.terminal import render_terminal
from npudiag.summary_model import BUSY_PARTS, Copies, HotOps, IdleCauses, Memory, ProfileTotals, RangeTree, Summary

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = {"profile": ProfileTotals, "hot_ops": HotOps, "copies": Copies, "memory": Memory, "idle_causes": IdleCauses}


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _check_covers(summary: dict) -> None:
    assert set(summary) <= _names(Summary), set(summary) - _names(Summary)
    for key, cls in BLOCKS.items():
        assert set(summary[key]) == _names(cls), (key, set(summary[key]) ^ _names(cls))
    for block in summary["ranges"].values():
        assert set(block) == _names(RangeTree)
    model = Summary.of(summary)
    # every value is the dict's own, block by block
    for key in BLOCKS:
        assert dataclasses.asdict(getattr(model, key)) == summary[key]
    assert {k: dataclasses.asdict(v) for k, v in model.ranges.items()} == summary["ranges"]
    for key in _names(Summary) - set(BLOCKS) - {"ranges"}:
        assert getattr(model, key) == summary.get(key, getattr(Summary(), key)), key


def test_the_model_holds_every_key_of_a_fixture_summary(tmp_path: Path) -> None:
    for name in ("sample_torch", "sample_msprof"):
        r = npudiag.analyze([ROOT / "fixtures" / name], tmp_path / name)
        _check_covers(r.summary)


def test_the_model_holds_every_key_of_corpus_summaries(tmp_path: Path, corpus: Path) -> None:
    folders = sorted(p for p in corpus.iterdir() if p.is_dir())
    assert folders
    for i, folder in enumerate(folders):
        r = npudiag.analyze([folder], tmp_path / str(i))
        if r.summary is not None:
            _check_covers(r.summary)


def test_busy_parts_are_the_glossary_split() -> None:
    """The profile block's split is the keys the producer sums, each a field of the block."""
    assert tuple(ProfileTotals().busy_parts) == BUSY_PARTS and set(BUSY_PARTS) <= _names(ProfileTotals)


@pytest.mark.parametrize("partial", [{}, {"profile": {"kernels": 7}}, {"hot_ops": None, "title": None}])
def test_a_partial_summary_renders_with_empty_blocks(partial: dict) -> None:
    """A summary missing blocks (an older npudiag's, a hand-made one) renders: each block at its default."""
    model = Summary.of(partial)
    assert model.copies.by_direction == [] and model.hot_ops.top == [] and model.idle_causes.idle_us == 0.0
    console = Console(file=io.StringIO(), width=80)
    render_terminal(model, console)
    assert "No device kernels found." in console.file.getvalue()
    assert render_markdown(model).startswith("## npudiag analyze")
    assert render_html(model, pa.table({"start_us": pa.array([], pa.float64())})).startswith("<!doctype html>")
