"""The review report: a self-contained HTML file of a store's clusters and pairs, each pair's
texts side by side with the changed words highlighted (see :func:`write_report`)."""

from dedup_store.review.report.model import (
    METHODS,
    Member,
    Overview,
    ReportCluster,
    ReportItem,
    ReportPair,
    ReportSummary,
    Verdict,
)
from dedup_store.review.report.writer import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_WORDS,
    ReportOptions,
    write_report,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_WORDS",
    "METHODS",
    "Member",
    "Overview",
    "ReportCluster",
    "ReportItem",
    "ReportOptions",
    "ReportPair",
    "ReportSummary",
    "Verdict",
    "write_report",
]
