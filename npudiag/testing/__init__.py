"""Test support shipped with the package: generators of profiles, dumps and workspaces in the real formats."""
