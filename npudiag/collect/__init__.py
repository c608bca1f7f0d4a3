"""Running vendor tools: child processes that die with npudiag, msprof runs, the toolkit and acl.json."""
