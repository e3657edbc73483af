"""The reviewer's part: what a person sees of the store's decisions and what they say back.

- :mod:`~dedup_store.review.explanation`: why two documents match (:class:`Explanation`), and
  a reviewer's verdicts (:class:`Review`, :class:`Verdict`).
- :mod:`~dedup_store.review.reviewing`: the facade's reviewer methods (explain, review,
  verdicts, canonical documents and settings).
- :mod:`~dedup_store.review.report`: the HTML review report, one self-contained file.

The SQL these read and write lives in :mod:`dedup_store.db.reports` and
:mod:`dedup_store.db.write.verdicts`; the terminal rendering of an alignment in
:mod:`dedup_store.cli.alignment`.
"""
