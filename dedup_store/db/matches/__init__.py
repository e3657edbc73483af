"""Matches: candidate pairs scored and decided by the match rule in SQL, and exact groups."""
