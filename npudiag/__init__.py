"""npudiag: diagnostics for Huawei Ascend NPU profiles, dumps and logs.

The library under the ``npudiag`` command. Each call returns a result with ``.summary`` (the dict
the CLI renders), ``.tables`` (name -> pyarrow.Table) and ``to_dict()`` (JSON-safe)::

    import npudiag
    r = npudiag.analyze(["fixtures/sample_torch"], "npudiag-out/torch")
    r.summary["profile"], r.tables["kernels"].num_rows
    npudiag.Summary.of(r.summary).copies.by_direction  # the summary's blocks typed, as renderers read them
    npudiag.load_output("npudiag-out/torch")             # the same, read back from the folder
    npudiag.gate("base_prof", "cur_prof").failed          # also compare, cluster
    npudiag.check(["PROF_000001_..."]).problems            # collection health, before analysing
    npudiag.parse_dump("dump"), npudiag.compare_dumps("dump", "golden")
    npudiag.parse_logs(["ascend/log"]).summary["first_error"]

The code is arranged by area: ``npudiag.profiling`` (msprof / torch_npu profiler output: formats,
ingest, analyses, rules, pipeline), ``npudiag.dump`` (dump configs, binary dump files, comparison)
and ``npudiag.logs`` (host and device logs, msnpureport, triage). Shared pieces sit at the root:
``store`` (atomic Parquet output), ``schemas``, ``errors``, ``executors``, ``collect`` (running
vendor tools) and ``report`` (renderers). ``npudiag.cli`` is the command line on top of them.

The functions load on first use, so ``import npudiag`` (and ``npudiag --help``) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npudiag.errors import InputError, NpudiagError, OptionError, OutputError, ToolError
from npudiag.results import Result
from npudiag.version import SCHEMA_VERSION as SCHEMA_VERSION
from npudiag.version import __version__

__all__ = [
    "analyze",
    "check",
    "load_output",
    "compare",
    "gate",
    "gate_config",
    "cluster",
    "parse_dump",
    "compare_dumps",
    "parse_logs",
    "NpudiagError",
    "InputError",
    "OptionError",
    "OutputError",
    "ToolError",
    "Result",
    "Summary",
    "__version__",
]

_LAZY = {
    "analyze": "npudiag.profiling.pipeline",
    "check": "npudiag.profiling.health",
    "load_output": "npudiag.profiling.pipeline",
    "compare": "npudiag.profiling.pipeline",
    "gate": "npudiag.profiling.pipeline",
    "gate_config": "npudiag.profiling.pipeline",
    "cluster": "npudiag.profiling.pipeline",
    "parse_dump": "npudiag.dump.pipeline",
    "compare_dumps": "npudiag.dump.pipeline",
    "parse_logs": "npudiag.logs.pipeline",
    "Summary": "npudiag.summary_model",
}

if TYPE_CHECKING:
    from npudiag.dump.pipeline import compare_dumps, parse_dump
    from npudiag.logs.pipeline import parse_logs
    from npudiag.profiling.health import check
    from npudiag.profiling.pipeline import analyze, cluster, compare, gate, gate_config, load_output
    from npudiag.summary_model import Summary


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'npudiag' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
