"""`python -m npudiag`: the command line, as the `npudiag` script runs it."""

from npudiag.cli import main

main()
