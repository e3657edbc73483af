"""Reads for people: documents, clusters, pairs and counts, the review report, explanations."""
