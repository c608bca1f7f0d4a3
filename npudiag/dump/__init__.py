"""Dumps: authoring dump configs, parsing CANN dump files into tensors, comparing two dumps."""
