"""npudiag: diagnostics for Huawei Ascend NPU profiles, dumps and logs.

The code is arranged by area: ``npudiag.profiling`` (msprof / torch_npu profiler output: formats,
ingest, analyses, rules), ``npudiag.dump`` (dump configs, binary dump files, dump comparison) and
``npudiag.logs`` (host and device logs, msnpureport, triage).  Shared pieces sit at the root:
``store`` (atomic Parquet output), ``schemas``, ``errors``, ``executors``, ``collect`` (running vendor
tools) and ``report`` (renderers).  ``npudiag.cli`` is the command line on top of them.
"""

__version__ = "0.1.0"
SCHEMA_VERSION = 2
