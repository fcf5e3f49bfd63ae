"""`hakiri serve`: the scheduler loop, manifest reload, the HTTP API and graceful shutdown."""
