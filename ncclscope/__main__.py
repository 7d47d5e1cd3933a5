"""`python -m ncclscope` runs the command line."""

from ncclscope.cli.entry import run

run()
