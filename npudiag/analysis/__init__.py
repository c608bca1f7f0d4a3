"""Pure functions over canonical tables: no file access, no printing."""
