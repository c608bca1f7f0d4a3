"""One reader per real profiler file format. Each returns Arrow tables conforming to npudiag.schemas."""
