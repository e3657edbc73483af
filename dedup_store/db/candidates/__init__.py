"""Candidate pairs: the lookups of stored keys, hot keys, and the rows of the keys."""
