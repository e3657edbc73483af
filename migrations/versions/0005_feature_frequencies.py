"""Document frequencies of SimHash features, for weighted SimHash (``simhash_weights``).

``feature_df`` counts, for every SimHash feature hash, the stored documents holding it;
``feature_documents`` (one row) the documents counted; ``document_features`` each document's
distinct features, so that a delete takes its counts back. Stores with ``count`` weights (every
store made before) leave them empty.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE {s}.feature_df (
    feature bigint PRIMARY KEY,
    df bigint NOT NULL
);
CREATE TABLE {s}.feature_documents (
    id smallint PRIMARY KEY,
    documents bigint NOT NULL,
    CONSTRAINT feature_documents_single_row CHECK (id = 1)
);
CREATE TABLE {s}.document_features (
    doc_id bigint PRIMARY KEY,
    features bigint[] NOT NULL
);
"""

DOWNGRADE = """
DROP TABLE {s}.document_features;
DROP TABLE {s}.feature_documents;
DROP TABLE {s}.feature_df;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
