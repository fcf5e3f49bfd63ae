"""Executes pipelines: batches persisted before data moves, claimed under leases, committed once."""
