"""Where an analysis summary goes as a file: one contract for every file renderer, one registry.

A :class:`Renderer` has a name (what a user types), the extension of the files it writes and
``render(view) -> str`` over a :class:`SummaryView`: the summary (the dict ``--format json`` prints, and
its typed blocks, :class:`npudiag.summary_model.Summary`, that the other renderers read), the command that
made it, and the analysis's tables, loaded only by a renderer that asks for one (the HTML page's copy plot). The
terminal view stays :func:`npudiag.report.terminal.render_terminal` (it draws on a Rich console, not
into a file). Adding a format is a module with its render function and one :func:`register` call
here; :func:`for_path` then finds it by a file's extension, and :func:`write_view` writes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.output import append_file, write_file
from npudiag.report.html import render_html
from npudiag.report.json_report import render_json
from npudiag.report.markdown import render_markdown
from npudiag.summary_model import Summary


@dataclass(frozen=True)
class SummaryView:
    """What a file renderer reads: ``summary`` (the dict ``analyze --json`` prints) or ``model`` (its typed
    blocks), the ``command`` that made it, and ``table(name)``, one of the analysis's tables, read when called."""

    summary: dict[str, Any]
    command: str
    table: Callable[[str], pa.Table]
    _texts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def model(self) -> Summary:
        return Summary.of(self.summary)

    def text(self, renderer: Renderer) -> str:
        """``renderer``'s text of this view, rendered once however many files and streams take it."""
        if renderer.name not in self._texts:
            self._texts[renderer.name] = renderer.render(self)
        return self._texts[renderer.name]


@dataclass(frozen=True)
class Renderer:
    name: str
    extensions: tuple[str, ...]  # the first is what the renderer's files are called
    render: Callable[[SummaryView], str]
    appends_to_step_summary: bool = False  # Markdown: GitHub's job summary is added to, never replaced


RENDERERS: dict[str, Renderer] = {}


def register(renderer: Renderer) -> Renderer:
    if renderer.name in RENDERERS:
        raise ValueError(f"renderer {renderer.name!r} registered twice")
    RENDERERS[renderer.name] = renderer
    return renderer


register(Renderer("json", (".json",), lambda v: render_json(v.summary) + "\n"))
register(Renderer("markdown", (".md", ".markdown"), lambda v: render_markdown(v.model, v.command), True))
register(Renderer("html", (".html", ".htm"), lambda v: render_html(v.model, v.table("copies"))))


def for_path(path: Path) -> Renderer:
    """The renderer whose files end like ``path``; ValueError naming the extensions there are."""
    suffix = Path(path).suffix.lower()
    for r in RENDERERS.values():
        if suffix in r.extensions:
            return r
    known = ", ".join(e for r in RENDERERS.values() for e in r.extensions)
    raise ValueError(f"{path}: no renderer writes {suffix or 'a name without an extension'}; expected one of {known}")


def is_step_summary(path: Path) -> bool:
    """Whether ``path`` is GitHub Actions' job summary file ($GITHUB_STEP_SUMMARY)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return bool(summary) and os.path.realpath(path) == os.path.realpath(summary)


def write_text(path: Path, text: str, *, appendable: bool, inputs: Iterable[Path] = ()) -> None:
    """``text`` at ``path`` through npudiag.output: appended where ``path`` is GitHub's job summary
    and the format may be (``appendable``), else the file written whole."""
    if appendable and is_step_summary(path):
        append_file(path, text if text.endswith("\n") else text + "\n")
    else:
        write_file(path, text.encode("utf-8"), inputs=inputs)


def write_view(renderer: Renderer, path: Path, view: SummaryView, inputs: Iterable[Path] = ()) -> None:
    """``view`` rendered by ``renderer`` at ``path`` (:func:`write_text`)."""
    write_text(path, view.text(renderer), appendable=renderer.appends_to_step_summary, inputs=inputs)
