"""What a store holds, in comparable form: documents, edges and cluster membership."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text


def snapshot(engine: Engine, schema: str) -> dict[str, Any]:
    """Every document row (id, external id, exact_of, fingerprint, shingles, metadata
    signature), every first document's band and block keys (whichever tier holds them), every
    edge, and the clusters as sets of external ids."""
    s = f'"{schema}"'
    with engine.connect() as conn:
        documents = conn.execute(
            text(
                f"SELECT id, external_id, exact_of, simhash, exact_hash, signature, shingle_count, "
                f"token_count, length, language, meta, body, shingles, meta_signature "
                f"FROM {s}.documents ORDER BY id"
            )
        ).all()
        keys = conn.execute(
            text(
                f"SELECT doc_id, array_agg(key ORDER BY kind, slot) FROM (SELECT * FROM "
                f"{s}.slot_keys UNION ALL SELECT * FROM {s}.recent_slot_keys) k "
                "GROUP BY doc_id ORDER BY doc_id"
            )
        ).all()
        edges = conn.execute(
            text(
                f"SELECT a, b, method, jaccard, containment, hamming, meta_score FROM {s}.edges "
                "ORDER BY a, b"
            )
        ).all()
        samples = conn.execute(
            text(f"SELECT key, doc_id FROM {s}.sample_keys ORDER BY key, doc_id")
        ).all()
        members = conn.execute(
            text(f"SELECT cluster_id, external_id FROM {s}.documents ORDER BY cluster_id")
        ).all()
        labels_are_members = conn.execute(
            text(
                f"SELECT bool_and(EXISTS (SELECT 1 FROM {s}.documents m WHERE m.id = d.cluster_id"
                f" AND m.cluster_id = d.cluster_id)) FROM {s}.documents d"
            )
        ).scalar_one()
    clusters: dict[int, set[str]] = {}
    for label, external_id in members:
        clusters.setdefault(label, set()).add(external_id)
    return {
        "documents": [tuple(row) for row in documents],
        "keys": [tuple(row) for row in keys],
        "edges": [tuple(row) for row in edges],
        "sample_keys": [tuple(row) for row in samples],
        "clusters": sorted(sorted(c) for c in clusters.values()),
        "labels_are_members": labels_are_members in (True, None),
    }
