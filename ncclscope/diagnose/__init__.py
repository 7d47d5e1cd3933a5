"""The diagnosis: the engine, the platform expectations, and the rules."""
