"""The reviewer's part of :class:`~dedup_store.service.DedupStore`: explanations, verdicts,
canonical documents and the store's settings.

The explanations and reviews (:mod:`~dedup_store.review.explanation`) are imported by the methods
that make them, so that a store opened for a ``check`` does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dedup_store.core.params import FingerprintParams
from dedup_store.db.repository import StoreTables
from dedup_store.db.schema.settings import StoreSettings, check_rule
from dedup_store.errors import InvalidDocumentError, InvalidParamsError
from dedup_store.ingest.records import nameable, stored_ids

if TYPE_CHECKING:
    from dedup_store.review.explanation import Explanation, Review, Verdict


class Reviewing:
    """Explanations, verdicts and canonical documents (mixed into ``DedupStore``)."""

    _tables: StoreTables
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
            InvalidDocumentError: a text given is not its document's (other shingles).
        """
        from dedup_store.review.explanation import explain_pair, given_text_is_stored

        stored_ids(a, b)
        pair, verdict = self._tables.stored_pair(a, b)
        for given, stored in ((text_a, pair.a), (text_b, pair.b)):
            if given is not None and not given_text_is_stored(stored, given, self.params):
                raise InvalidDocumentError(
                    f"the text given for {stored.external_id!r} is not that document's: its "
                    "shingles differ from the stored ones (give the text it was added with)"
                )
        texts = (
            text_a if text_a is not None else pair.a.body,
            text_b if text_b is not None else pair.b.body,
        )
        return explain_pair(pair, self.params, verdict, texts)

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

        ``not_duplicate`` parts them: when match edges still join them (exact copies
        included), the weakest set of edges that does is cut (a minimum cut weighted by the
        edges' scores), and the answer lists those edges (:attr:`Review.cut`). ``duplicate``
        joins their clusters. A verdict replaces an earlier one on the same pair and stays in
        force when either document is deleted and added again, or updated.

        Raises:
            UnknownDocumentError: either document is not stored.
            InvalidParamsError: ``a`` and ``b`` are the same document, or the verdict
                contradicts others (a pair judged not duplicates that duplicate verdicts join).
        """
        from dedup_store.review.explanation import Review, Verdict

        decision = Verdict(verdict)
        stored_ids(a, b)
        if a == b:
            raise InvalidParamsError(f"a verdict needs two documents, got {a!r} twice")
        return Review.of(*self._tables.record_verdict((a, b), decision.value, note, by))

    def clear_review(self, a: str, b: str) -> bool:
        """Take back the verdict on ``a`` and ``b`` (their stored edges count again); returns
        whether there was one (none can name an id with a NUL character)."""
        if not (nameable(a) and nameable(b)):
            return False
        return self._tables.clear_verdict((a, b))

    def verdicts(self) -> list[Review]:
        """Every verdict, newest first."""
        from dedup_store.review.explanation import Review

        rows, cut = self._tables.verdict_rows()
        return [Review.of(row, cut) for row in rows]

    @property
    def settings(self) -> StoreSettings:
        """The store's settings (whether it keeps texts, its canonical rule)."""
        return self._tables.settings()

    def set_canonical(self, id: str, *, by: str | None = None) -> None:
        """Declare document ``id`` the canonical one of its cluster (over the rule, and over
        earlier choices in the same cluster).

        Raises:
            UnknownDocumentError: ``id`` is not stored.
        """
        stored_ids(id)
        self._tables.choose_canonical(id, by)

    def set_canonical_rule(self, rule: str) -> None:
        """Choose the rule that picks each cluster's canonical document: ``oldest``,
        ``longest``, ``meta:FIELD`` (largest value) or ``meta:FIELD:min`` (smallest).

        Raises:
            InvalidParamsError: an unknown rule.
        """
        self._tables.save_canonical_rule(check_rule(rule))
