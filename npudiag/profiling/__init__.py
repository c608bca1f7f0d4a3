"""Profiling: msprof / torch_npu profiler output found, read into the canonical tables and analysed."""
