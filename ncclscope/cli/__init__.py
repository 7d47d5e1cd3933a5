"""The command line: the app and its commands, entry point, options, --follow, the demo."""
