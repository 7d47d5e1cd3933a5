"""Parsers: one module per input kind, each driven by its grammar in grammars/."""
