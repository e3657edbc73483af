"""Writes: batches, single adds and deletes, the writers' locks, verdicts and feature counts."""
