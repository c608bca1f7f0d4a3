"""Pure functions over the canonical profile tables: no file access, no printing."""
