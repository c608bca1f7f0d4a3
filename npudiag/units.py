"""How sizes read in text: one definition for finding titles and every renderer."""

from __future__ import annotations


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``1.5 KiB``; binary units up to GiB; ``-`` for none."""
    if n is None:
        return "-"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return str(x)


def shown_name(name: str) -> str:
    """A metric or total as a report shows it beside a value that carries its unit: without the unit
    its id ends in (``kernel_time_us`` -> ``kernel_time``, next to ``94.34ms``)."""
    for suffix in ("_us", "_bytes"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
