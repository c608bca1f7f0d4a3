"""Renderers: each takes the summary dict from npudiag.profiling.analysis.summary and writes one format."""
