"""The ingest path: from input files to written batches.

- :mod:`~dedup_store.ingest.inputs`: records read from files, directories and streams (text,
  JSONL, CSV), one at a time.
- :mod:`~dedup_store.ingest.records`: what makes a record storable, and how a bad one is
  reported (its file and line).
- :mod:`~dedup_store.ingest.prepared`: a batch validated and fingerprinted, ready to write.
- :mod:`~dedup_store.ingest.workers`: where batches are fingerprinted (the calling thread, or
  worker processes).
- :mod:`~dedup_store.ingest.pipeline`: batches written one transaction each, or in one bulk
  load.
"""
