"""The diagnosis rules, one module per family; see registry.py for how a rule is written."""
