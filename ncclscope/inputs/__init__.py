"""Opening inputs: files, folders, pipes, .gz, bundles and run directories, growing files, Ctrl-C, redaction."""
