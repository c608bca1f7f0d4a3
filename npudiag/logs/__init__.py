"""Logs: exporting with msnpureport, parsing host and device logs, triage of what failed."""
