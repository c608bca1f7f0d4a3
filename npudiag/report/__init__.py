"""Renderers: each takes the summary dict from npudiag.analysis.summary and writes one format."""
