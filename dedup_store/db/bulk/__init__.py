"""Bulk loads: the load without per-key index maintenance, binary COPY and checkpoints."""
