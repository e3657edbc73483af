"""Initial schema: params, documents, key tables, edges and the reporting views.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TABLES = """
CREATE TABLE {s}.params (
    id smallint PRIMARY KEY,
    params jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT params_single_row CHECK (id = 1)
);

CREATE SEQUENCE {s}.document_ids AS bigint;

CREATE TABLE {s}.documents (
    id bigint PRIMARY KEY,
    external_id text NOT NULL UNIQUE,
    exact_hash bytea NOT NULL,
    simhash bigint NOT NULL,
    signature integer[] NOT NULL,
    shingles integer[] NOT NULL,
    shingle_count integer NOT NULL,
    token_count integer NOT NULL,
    length integer NOT NULL,
    language text NOT NULL,
    meta jsonb,
    body text,
    cluster_id bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_exact_hash ON {s}.documents (exact_hash);
CREATE INDEX documents_cluster_id ON {s}.documents (cluster_id);

CREATE TABLE {s}.band_keys (
    band smallint NOT NULL,
    key bigint NOT NULL,
    doc_id bigint NOT NULL
);
CREATE INDEX band_keys_lookup ON {s}.band_keys (band, key) INCLUDE (doc_id);

CREATE TABLE {s}.block_keys (
    block smallint NOT NULL,
    key bigint NOT NULL,
    doc_id bigint NOT NULL
);
CREATE INDEX block_keys_lookup ON {s}.block_keys (block, key) INCLUDE (doc_id);

CREATE TABLE {s}.sample_keys (
    key integer NOT NULL,
    doc_id bigint NOT NULL
);
CREATE INDEX sample_keys_lookup ON {s}.sample_keys (key) INCLUDE (doc_id);

CREATE TABLE {s}.edges (
    a bigint NOT NULL REFERENCES {s}.documents (id) ON DELETE CASCADE,
    b bigint NOT NULL REFERENCES {s}.documents (id) ON DELETE CASCADE,
    method text NOT NULL,
    jaccard double precision NOT NULL,
    containment double precision NOT NULL,
    hamming smallint NOT NULL,
    found_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (a, b),
    CONSTRAINT edges_ordered CHECK (a < b),
    CONSTRAINT edges_method CHECK (method IN ('exact', 'minhash', 'simhash', 'containment'))
);
CREATE INDEX edges_b ON {s}.edges (b);
"""

VIEWS = """
CREATE VIEW {s}.duplicate_pairs AS
SELECT da.external_id AS a, db.external_id AS b, e.method, e.jaccard, e.containment,
       e.hamming, e.found_at, e.a AS a_doc_id, e.b AS b_doc_id
FROM {s}.edges e
JOIN {s}.documents da ON da.id = e.a
JOIN {s}.documents db ON db.id = e.b;

CREATE VIEW {s}.cluster_members AS
SELECT d.cluster_id, r.external_id AS representative, d.external_id, d.id AS doc_id,
       d.created_at, d.id = d.cluster_id AS is_representative
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id;

CREATE VIEW {s}.cluster_sizes AS
SELECT d.cluster_id, r.external_id AS representative, count(*) AS size,
       min(d.created_at) AS first_seen, max(d.created_at) AS last_seen
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id
GROUP BY d.cluster_id, r.external_id;

CREATE VIEW {s}.duplicates_per_day AS
SELECT date_trunc('day', d.created_at)::date AS day,
       count(*) AS documents,
       count(*) FILTER (WHERE m.best = 'exact') AS exact_duplicates,
       count(*) FILTER (WHERE m.best = 'near') AS near_duplicates,
       count(*) FILTER (WHERE m.best IS NULL) AS new_documents
FROM {s}.documents d
LEFT JOIN LATERAL (
    SELECT CASE WHEN bool_or(e.method = 'exact') THEN 'exact'
                WHEN count(*) > 0 THEN 'near' END AS best
    FROM {s}.edges e WHERE e.b = d.id
) m ON true
GROUP BY 1;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(TABLES.format(s=s))
    op.execute(VIEWS.format(s=s))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    for view in ("duplicates_per_day", "cluster_sizes", "cluster_members", "duplicate_pairs"):
        op.execute(f"DROP VIEW IF EXISTS {s}.{view}")
    for table in ("edges", "sample_keys", "block_keys", "band_keys", "documents", "params"):
        op.execute(f"DROP TABLE IF EXISTS {s}.{table}")
    op.execute(f"DROP SEQUENCE IF EXISTS {s}.document_ids")
