"""`python -m ncclscope` runs the command line."""

from ncclscope.entry import main

main()
