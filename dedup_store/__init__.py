"""dedup_store: find near-duplicate documents and remember them in PostgreSQL.

The public names are re-exported here; import from ``dedup_store`` only. They are loaded when
first used (the store needs SQLAlchemy and numpy, which the command line's ``--help`` and
``--version`` do not), so ``import dedup_store`` itself is quick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dedup_store.plumbing import lazy_names

if TYPE_CHECKING:
    from dedup_store.aio import AsyncDedupStore
    from dedup_store.core import (
        Fingerprint,
        FingerprintBatch,
        FingerprintParams,
        canonicalize,
        fingerprint,
        fingerprint_batch,
    )
    from dedup_store.errors import (
        ConflictError,
        DatabaseError,
        DedupStoreError,
        EmptyDocumentError,
        ForeignSchemaError,
        InputFormatError,
        InvalidDocumentError,
        InvalidNameError,
        InvalidParamsError,
        OutputError,
        OwnerRequiredError,
        ParamsMismatchError,
        SchemaOutdatedError,
        SparkError,
        StoreNotInitializedError,
        UnknownDocumentError,
        UnsupportedServerError,
    )
    from dedup_store.results import (
        AddResult,
        CheckResult,
        Cluster,
        Document,
        IngestSummary,
        Match,
        Method,
        Pair,
        RecordError,
        Scores,
        Stats,
        Status,
    )
    from dedup_store.review.explanation import Explanation, Review, Verdict
    from dedup_store.review.report.model import ReportSummary
    from dedup_store.service import DedupStore

__version__ = "0.1.0"

_HOMES = {
    "dedup_store.core": (
        "Fingerprint",
        "FingerprintBatch",
        "FingerprintParams",
        "canonicalize",
        "fingerprint",
        "fingerprint_batch",
    ),
    "dedup_store.errors": (
        "ConflictError",
        "DatabaseError",
        "DedupStoreError",
        "EmptyDocumentError",
        "ForeignSchemaError",
        "InputFormatError",
        "InvalidDocumentError",
        "InvalidNameError",
        "InvalidParamsError",
        "OutputError",
        "OwnerRequiredError",
        "ParamsMismatchError",
        "SchemaOutdatedError",
        "SparkError",
        "StoreNotInitializedError",
        "UnknownDocumentError",
        "UnsupportedServerError",
    ),
    "dedup_store.results": (
        "AddResult",
        "CheckResult",
        "Cluster",
        "Document",
        "IngestSummary",
        "Match",
        "Method",
        "Pair",
        "RecordError",
        "Scores",
        "Stats",
        "Status",
    ),
    "dedup_store.review.report.model": ("ReportSummary",),
    "dedup_store.review.explanation": ("Explanation", "Review", "Verdict"),
    "dedup_store.service": ("DedupStore",),
    "dedup_store.aio": ("AsyncDedupStore",),
}

__all__ = [
    "AddResult",
    "AsyncDedupStore",
    "CheckResult",
    "Cluster",
    "ConflictError",
    "DatabaseError",
    "DedupStore",
    "DedupStoreError",
    "Document",
    "EmptyDocumentError",
    "Explanation",
    "Fingerprint",
    "FingerprintBatch",
    "FingerprintParams",
    "ForeignSchemaError",
    "IngestSummary",
    "InputFormatError",
    "InvalidDocumentError",
    "InvalidNameError",
    "InvalidParamsError",
    "Match",
    "Method",
    "OutputError",
    "OwnerRequiredError",
    "Pair",
    "ParamsMismatchError",
    "RecordError",
    "ReportSummary",
    "Review",
    "SchemaOutdatedError",
    "Scores",
    "SparkError",
    "Stats",
    "Status",
    "StoreNotInitializedError",
    "UnknownDocumentError",
    "UnsupportedServerError",
    "Verdict",
    "__version__",
    "canonicalize",
    "fingerprint",
    "fingerprint_batch",
]


__getattr__, __dir__ = lazy_names(globals(), _HOMES, __all__)
