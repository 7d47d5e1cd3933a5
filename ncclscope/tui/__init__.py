"""The terminal UI (`ncclscope tui`): a Textual application over one Case and its findings."""
