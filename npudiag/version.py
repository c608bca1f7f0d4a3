"""npudiag's version and the version of its output tables' layout (below the package facade, so
any module may import them without importing the public API)."""

__version__ = "0.1.0"
SCHEMA_VERSION = 2
