"""Test stand-in for torch_npu: only ``torch_npu.profiler.profiler.analyse``, the offline parse."""
