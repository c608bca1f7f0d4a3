"""npudiag: diagnostics for Huawei Ascend NPU profiles, dumps and logs.

The library is usable without the CLI: ``npudiag.analyze.analyze_paths`` turns profiler output into
Arrow tables, ``npudiag.analysis`` computes summaries from them, and ``npudiag.report`` renders.
"""

__version__ = "0.1.0"
SCHEMA_VERSION = 2
