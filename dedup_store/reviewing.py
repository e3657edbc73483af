"""The reviewer's part of :class:`~dedup_store.service.DedupStore`: explanations, verdicts,
canonical documents and the store's settings."""

from __future__ import annotations

from sqlalchemy import Connection

from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates.stored import find_documents
from dedup_store.db.reports.explain import stored_pair
from dedup_store.db.schema import settings
from dedup_store.db.schema.settings import StoreSettings
from dedup_store.db.server.engine import Database
from dedup_store.db.write import locks, verdicts
from dedup_store.errors import InvalidDocumentError, UnknownDocumentError
from dedup_store.review import Explanation, Review, Verdict, explain_pair


class Reviewing:
    """Explanations, verdicts and canonical documents (mixed into ``DedupStore``)."""

    _db: Database
    schema: str
    params: FingerprintParams

    def explain(
        self, a: str, b: str, *, text_a: str | None = None, text_b: str | None = None
    ) -> Explanation:
        """Why stored documents ``a`` and ``b`` match (or do not): scores, the keys that find
        them, their edge and verdict, and the word alignment of their texts.

        The texts are the stored ones (a store made with ``keep_text``) unless given; without
        both, the explanation has no alignment.

        Raises:
            UnknownDocumentError: either document is not stored.
        """

        def work(conn: Connection) -> Explanation:
            pair = stored_pair(conn, self.schema, self.params, a, b)
            verdict = verdicts.of_pair(conn, self.schema, (a, b))
            texts = (
                text_a if text_a is not None else pair.a.body,
                text_b if text_b is not None else pair.b.body,
            )
            return explain_pair(pair, self.params, verdict, texts)

        result: Explanation = self._db.run(work)
        return result

    def review(
        self,
        a: str,
        b: str,
        verdict: Verdict | str,
        *,
        note: str | None = None,
        by: str | None = None,
    ) -> Review:
        """Record a reviewer's verdict on documents ``a`` and ``b``, and apply it at once.

        ``not_duplicate`` keeps their edge out of cluster merging (their cluster splits unless
        other matches still join them); ``duplicate`` joins their clusters. A verdict replaces
        an earlier one on the same pair and stays in force when either document is deleted and
        added again, or updated.

        Raises:
            UnknownDocumentError: either document is not stored.
            InvalidDocumentError: ``a`` and ``b`` are the same document.
        """
        decision = Verdict(verdict)
        if a == b:
            raise InvalidDocumentError(f"a verdict needs two documents, got {a!r} twice")

        def work(conn: Connection) -> Review:
            locks.lock_store(conn, self.schema)
            _require_documents(conn, self.schema, (a, b))
            row = verdicts.record(conn, self.schema, (a, b), decision.value, note, by)
            verdicts.recluster(
                conn, self.schema, verdicts.cluster_labels(conn, self.schema, (a, b))
            )
            return Review.of(row)

        result: Review = self._db.run(work)
        return result

    def clear_review(self, a: str, b: str) -> bool:
        """Take back the verdict on ``a`` and ``b`` (their stored edges count again); returns
        whether there was one."""

        def work(conn: Connection) -> bool:
            locks.lock_store(conn, self.schema)
            cleared = verdicts.clear(conn, self.schema, (a, b))
            if cleared:
                labels = verdicts.cluster_labels(conn, self.schema, (a, b))
                verdicts.recluster(conn, self.schema, labels)
            return cleared

        result: bool = self._db.run(work)
        return result

    def verdicts(self) -> list[Review]:
        """Every verdict, newest first."""
        rows = self._db.read(lambda conn: verdicts.all_rows(conn, self.schema))
        return [Review.of(row) for row in rows]

    @property
    def settings(self) -> StoreSettings:
        """The store's settings (whether it keeps texts, its canonical rule)."""
        result: StoreSettings = self._db.read(lambda conn: settings.load(conn, self.schema))
        return result

    def set_canonical(self, id: str, *, by: str | None = None) -> None:
        """Declare document ``id`` the canonical one of its cluster (over the rule, and over
        earlier choices in the same cluster).

        Raises:
            UnknownDocumentError: ``id`` is not stored.
        """

        def work(conn: Connection) -> None:
            _require_documents(conn, self.schema, (id,))
            settings.choose_canonical(conn, self.schema, id, by)

        self._db.run(work)

    def set_canonical_rule(self, rule: str) -> None:
        """Choose the rule that picks each cluster's canonical document: ``oldest``,
        ``longest``, ``meta:FIELD`` (largest value) or ``meta:FIELD:min`` (smallest).

        Raises:
            InvalidParamsError: an unknown rule.
        """
        checked = settings.check_rule(rule)

        def work(conn: Connection) -> None:
            current = settings.load(conn, self.schema)
            settings.save(conn, self.schema, StoreSettings(current.keep_text, checked))

        self._db.run(work)


def _require_documents(conn: Connection, schema: str, ids: tuple[str, ...]) -> None:
    found = find_documents(conn, schema, list(ids))
    for external_id in ids:
        if external_id not in found:
            raise UnknownDocumentError(external_id)
