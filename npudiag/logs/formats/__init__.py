"""CANN log formats: plog, device logs, msnpureport slog, pasted console text."""
