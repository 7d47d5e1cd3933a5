"""The runner (`ncclscope run`): invoke collectives and collect complete evidence in a run directory."""
