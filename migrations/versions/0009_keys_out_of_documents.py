"""The band and block keys leave ``documents``: the tier tables hold them.

A document's band keys are a function of its MinHash signature and its block keys of its
SimHash, both of which ``documents`` keeps; since revision 0008 the lookups read the keys from
the tier tables ``settled_keys`` and ``recent_keys`` only. The arrays cost a bulk load a fifth
of the bytes it sends for each document (264 of 1,283 at the default parameters) and the
server the decoding of 22 array elements a row. A store whose tier tables do not exist yet (one
upgraded from 0007) gets them from the stored signatures and SimHashes when it opens.

Downgrading adds the arrays back, filled from the tier tables: a first document's from its own
row, an exact copy's from the row of its first document. Equal texts have equal band keys; in a
store with weighted SimHash features a copy written later may have had block keys of its own,
which revision 0008 read only when the copy took its first document's place.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE {s}.documents DROP COLUMN band_keys, DROP COLUMN block_keys;
"""

ADD_ARRAYS = """
ALTER TABLE {s}.documents
    ADD COLUMN band_keys bigint[] NOT NULL DEFAULT '{{}}',
    ADD COLUMN block_keys bigint[] NOT NULL DEFAULT '{{}}';
"""

# the keys of each slot, in slot order, from the columns band_<slot> and block_<slot> of a
# tier table's rows (their number depends on the store's parameters)
FILL_ARRAYS = """
UPDATE {s}.documents d SET band_keys = k.band_keys, block_keys = k.block_keys
FROM (
    SELECT t.id,
           ARRAY(SELECT c.value::bigint FROM jsonb_each_text(to_jsonb(t)) c
                 WHERE c.key LIKE 'band\\_%' ORDER BY substr(c.key, 6)::int) AS band_keys,
           ARRAY(SELECT c.value::bigint FROM jsonb_each_text(to_jsonb(t)) c
                 WHERE c.key LIKE 'block\\_%' ORDER BY substr(c.key, 7)::int) AS block_keys
    FROM (SELECT * FROM {s}.settled_keys UNION ALL SELECT * FROM {s}.recent_keys) t
) k
WHERE k.id = coalesce(d.exact_of, d.id);
"""

DOWNGRADE_END = """
ALTER TABLE {s}.documents
    ALTER COLUMN band_keys DROP DEFAULT,
    ALTER COLUMN block_keys DROP DEFAULT,
    ALTER COLUMN band_keys SET STATISTICS 0,
    ALTER COLUMN block_keys SET STATISTICS 0;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(ADD_ARRAYS.format(s=s))
    tiers = op.get_bind().exec_driver_sql(
        "SELECT to_regclass(%(settled)s) IS NOT NULL AND to_regclass(%(recent)s) IS NOT NULL",
        {"settled": f"{s}.settled_keys", "recent": f"{s}.recent_keys"},
    )
    if tiers.scalar_one():  # a store opened at 0008 or later has them
        op.execute(FILL_ARRAYS.format(s=s))
    op.execute(DOWNGRADE_END.format(s=s))
