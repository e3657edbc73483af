"""dedup_store: find near-duplicate documents and remember them in PostgreSQL.

The public names are re-exported here; import from ``dedup_store`` only.
"""

from dedup_store.core import (
    Fingerprint,
    FingerprintBatch,
    FingerprintParams,
    canonicalize,
    fingerprint,
    fingerprint_batch,
)
from dedup_store.errors import (
    DatabaseError,
    DedupStoreError,
    EmptyDocumentError,
    InputFormatError,
    InvalidDocumentError,
    InvalidNameError,
    InvalidParamsError,
    ParamsMismatchError,
    SchemaOutdatedError,
    StoreNotInitializedError,
    UnknownDocumentError,
)
from dedup_store.results import (
    AddResult,
    Cluster,
    Document,
    IngestSummary,
    Match,
    Method,
    Pair,
    RecordError,
    Stats,
    Status,
)
from dedup_store.service import DedupStore

__version__ = "0.1.0"

__all__ = [
    "AddResult",
    "Cluster",
    "DatabaseError",
    "DedupStore",
    "DedupStoreError",
    "Document",
    "EmptyDocumentError",
    "Fingerprint",
    "FingerprintBatch",
    "FingerprintParams",
    "IngestSummary",
    "InputFormatError",
    "InvalidDocumentError",
    "InvalidNameError",
    "InvalidParamsError",
    "Match",
    "Method",
    "Pair",
    "ParamsMismatchError",
    "RecordError",
    "SchemaOutdatedError",
    "Stats",
    "Status",
    "StoreNotInitializedError",
    "UnknownDocumentError",
    "__version__",
    "canonicalize",
    "fingerprint",
    "fingerprint_batch",
]
