"""Candidate pairs: the lookups of stored keys by tier, hot keys and filter, and their rows."""
