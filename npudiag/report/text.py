"""Text from inputs, shown safely, and the one table style every terminal renderer uses.

Nothing from an input (log text, file names, op names, config values) is ever read as Rich markup:
:func:`plain` turns it into a :class:`rich.text.Text` with control characters other than TAB shown
escaped (``\\x1b``), so a log line cannot style, hide or rewrite what the terminal shows.

:func:`table` lays columns out for the terminal's width: numbers keep their full width and never
wrap; names and free text wrap onto more lines and are never cut (two names that differ only in
their middle stay told apart); when even that does not fit, columns are dropped in their declared
priority order (highest number first; priority 0 is a key column and is always kept).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudiag.report.escape import clean

__all__ = ["ELLIPSIS", "Col", "clean", "count", "middle", "pack_lines", "plain", "say", "table"]

ELLIPSIS = "…"
_GAP = 2  # what a column costs beside its text: one space of padding and the box's divider


def plain(value: Any, style: str = "") -> Text:
    """Input text for the terminal: never markup, control characters escaped."""
    if isinstance(value, Text):
        return value
    return Text(clean(value), style=style)


def pack_lines(pieces: Iterable[tuple[str, str]], width: int) -> list[str]:
    """Lines of at most ``width`` characters, filled greedily from ``(glue, piece)`` pairs: a piece
    goes on the current line after its glue where it fits, else it starts a new line (without its
    glue); a piece longer than ``width`` gets a line of its own."""
    lines: list[str] = []
    for glue, piece in pieces:
        if lines and (lines[-1] == "" or len(lines[-1]) + len(glue) + len(piece) <= width):
            lines[-1] += (glue if lines[-1] else "") + piece
        else:
            lines.append(piece)
    return lines


def count(n: int, word: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``1,024 files``: a number with its noun in the right number."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


@dataclass
class Col:
    header: str
    kind: str = "num"  # num: right-aligned, never cut; name and text: wrap, never cut; fixed: never cut, left
    priority: int = 1  # 0: a key column, always shown; higher numbers are dropped first when the terminal is narrow
    min_width: int = 8
    max_width: int | None = None
    style: str = ""


def _width(cell: Text) -> int:
    return max((len(line) for line in cell.plain.split("\n")), default=0)


def table(
    console: Console, title: str | Text | None, cols: list[Col], rows: list[list[Any]], *, caption: str | None = None
) -> Table:
    """A Rich table of ``rows`` (cells: str, numbers or Text) that fits ``console.width``."""
    cells = [[plain(c) if not isinstance(c, Text) else c for c in row] for row in rows]
    keep, widths = _layout(console.width, cols, cells)
    t = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        expand=False,
        show_edge=False,
    )
    for j in keep:
        col = cols[j]
        if col.kind in _FIXED:  # numbers right-aligned; neither kind is ever wrapped or cut
            justify = "right" if col.kind == "num" else "left"
            t.add_column(col.header, justify=justify, no_wrap=True, min_width=widths[j], style=col.style)
        else:  # a name or text is shown whole: wrapped onto more lines, never cut
            t.add_column(col.header, overflow="fold", width=widths[j], style=col.style)
    wrap = [j for j in keep if cols[j].kind not in _FIXED]
    for row in cells:
        for j in wrap:
            if j < len(row):
                row[j] = wrapped(row[j], widths[j])
        t.add_row(*(row[j] if j < len(row) else Text("") for j in keep))
    return t


_FIXED = ("num", "fixed")  # the kinds of column that keep their natural width


def _layout(width: int, cols: list[Col], cells: list[list[Text]]) -> tuple[list[int], dict[int, int]]:
    """The columns kept (dropped by priority while even their floors do not fit) and each one's width: fixed
    columns their natural width, names and text the room left, shared by natural width above their floors."""
    natural = [_natural(j, col, cells) for j, col in enumerate(cols)]
    floors = [_floor(j, col, natural[j], cells) for j, col in enumerate(cols)]
    keep = list(range(len(cols)))
    while sum(floors[j] + _GAP for j in keep) > width and any(cols[j].priority > 0 for j in keep):
        keep.remove(max((j for j in keep if cols[j].priority > 0), key=lambda j: (cols[j].priority, j)))
    widths = {j: natural[j] for j in keep}
    room = width - sum(natural[j] + _GAP for j in keep if cols[j].kind in _FIXED)
    flexible = [j for j in keep if cols[j].kind not in _FIXED]
    if sum(natural[j] + _GAP for j in flexible) > room:
        spare = max(room - sum(floors[j] + _GAP for j in flexible), 0)
        total_extra = sum(natural[j] - floors[j] for j in flexible) or 1
        for j in flexible:
            widths[j] = floors[j] + int(spare * (natural[j] - floors[j]) / total_extra)
    return keep, widths


def _natural(j: int, col: Col, cells: list[list[Text]]) -> int:
    """Column ``j``'s widest line (its header's at least), a name or text capped at its max_width."""
    w = max([len(col.header)] + [_width(r[j]) for r in cells if j < len(r)])
    return min(w, col.max_width) if col.max_width and col.kind not in _FIXED else w


def _floor(j: int, col: Col, natural: int, cells: list[list[Text]]) -> int:
    """The narrowest column ``j`` may get: its natural width for numbers and fixed cells; for names and text its
    min_width (or header); free text wraps at spaces, so its longest word up to 40 characters is its floor too
    (a path is never broken mid-word while a less important column could make room)."""
    if col.kind in _FIXED:
        return natural
    longest = max([0] + [len(w) for r in cells if j < len(r) for w in r[j].plain.split()]) if col.kind == "text" else 0
    return min(natural, max(col.min_width, len(col.header), min(longest, 40)))


# a long name breaks after one of these (op_name_with_parts, a/path, Module.sub.name, rank:step, a-b, a,b) or at a
# space, never inside a word where it can be helped: "AI_VECTOR_CORE" wraps as "AI_VECTOR_" / "CORE", not
# "AI_VECTOR_C" / "ORE"
_BREAK_AFTER = frozenset("_/.:,-) ")


def line_spans(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` wrapped to ``width``: after a boundary character, at a
    space or between the words of a CamelCase name where one is on the line, else folded at the width
    (a word longer than the column)."""
    spans: list[tuple[int, int]] = []
    width = max(width, 1)
    for at, part in _parts(text):
        start, n = 0, len(part)
        while n - start > width:
            end = start + width
            cut = end if part[end] == " " else _last_break(part, start, end)
            cut = cut if cut > start else end
            spans.append((at + start, at + start + len(part[start:cut].rstrip(" "))))
            start = cut
            while start < n and part[start] == " ":
                start += 1
        spans.append((at + start, at + n))
    return spans


def _last_break(part: str, start: int, end: int) -> int:
    """The last place in ``part[start:end]`` a line may end: at a space where the line has one (words
    stay whole); else, in a word longer than the line, after a boundary character (not the point of a
    decimal number) or before a capital that follows a small letter; ``start`` where there is none."""
    space = part.rfind(" ", start + 1, end + 1)
    if space > start:
        return space
    for k in range(end, start, -1):
        a, b = part[k - 1], part[k]
        if (a in _BREAK_AFTER and not (a == "." and b.isdigit() and part[k - 2 : k - 1].isdigit())) or (
            b.isupper() and a.islower()
        ):
            return k
    return start


def _parts(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` already there, with their offsets."""
    out, at = [], 0
    for line in text.split("\n"):
        out.append((at, line))
        at += len(line) + 1
    return out


def wrapped(cell: Text, width: int) -> Text:
    """``cell`` with its lines broken as :func:`line_spans` says (styles kept)."""
    text = cell.plain
    if all(len(line) <= width for line in text.split("\n")):
        return cell
    return Text("\n").join(cell[a:b] for a, b in line_spans(text, width))


def say(console: Console, *parts: Any, style: str = "") -> None:
    """One line of our words (``str`` with our markup) and input values (``Text`` / anything else,
    shown plain): ``say(c, "[bold]file[/]", plain(path))``."""
    line = Text(style=style)
    for p in parts:
        if isinstance(p, Text):
            line.append_text(p)
        elif isinstance(p, str):
            line.append_text(Text.from_markup(p))
        else:
            line.append_text(plain(p))
    console.print(line, highlight=False)
