"""`python -m ncclscope` runs the command line."""

from ncclscope.cli import main

main()
