"""What ``analyze`` is asked to do, as one typed value from the command line down to each rank's task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from npudiag.errors import OptionError
from npudiag.profiling.analysis.window import Window

RUNS = ("latest", "all")  # what discovery does with repeated runs of one process


def window_option(steps: Any = None, time: Any = None) -> Window:
    """:meth:`Window.of`, with OptionError naming ``steps`` or ``time`` when one is wrong."""
    try:
        return Window.of(steps, time)
    except ValueError as exc:
        raise OptionError(str(exc), "steps" if "step" in str(exc) else "time") from None


@dataclass(frozen=True)
class AnalyzeOptions:
    """``window``: the steps / time to keep; ``rule_options``: {rule: {option: value}}; ``top`` /
    ``by``: the hot-op list of the summary; ``runs``: of repeated runs of one process, the
    ``"latest"`` or ``"all"``; ``export``: export collected-but-unexported folders first;
    ``follow_symlinks``: follow links to folders while discovering; ``force``: replace an ``--out``
    folder npudiag did not write; ``scheduler`` / ``dask``: run the ranks on Dask."""

    window: Window = Window()
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    top: int = 20
    by: str = "type"
    runs: str = "latest"
    export: bool = False
    follow_symlinks: bool = False
    force: bool = False
    scheduler: str | None = None
    dask: bool = False

    @classmethod
    def of(
        cls, *, steps: Any = None, time: Any = None, rule_options: dict[str, dict[str, Any]] | None = None, **rest: Any
    ) -> AnalyzeOptions:
        """From the library's keywords (``steps="10:100"`` or (10, 100), ``time="1.5s:3s"`` or (µs, µs));
        OptionError names the option that is wrong."""
        options = cls(window_option(steps, time), {k: dict(v) for k, v in (rule_options or {}).items()}, **rest)
        if options.runs not in RUNS:
            raise OptionError(f"runs must be 'latest' or 'all', not {options.runs!r}", "runs")
        return options

    @property
    def distributed(self) -> bool:
        return bool(self.scheduler or self.dask)
