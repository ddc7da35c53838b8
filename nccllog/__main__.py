"""`python -m nccllog` runs the command-line interface."""

from nccllog.cli import main

main()
