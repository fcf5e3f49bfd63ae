"""One module per use case; the CLI and the server call these and only render results."""
