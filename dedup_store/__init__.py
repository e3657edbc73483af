"""dedup_store."""
