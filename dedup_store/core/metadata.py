"""Metadata sets: the members a document's ``meta`` holds in the fields named by
:attr:`~dedup_store.core.params.FingerprintParams.meta_fields`, and their MinHash signatures.

A field's value is a string (one member) or a list of strings. Each member is normalized (NFKC,
casefolded, stripped; an empty one is dropped) and qualified by its field, so ``tags: ["x"]``
and ``keywords: ["x"]`` give the different members ``tags:x`` and ``keywords:x``. A document
none of whose named fields is present, or whose named fields are all empty, has no metadata
set: its pairs are scored on their content alone.

A metadata set's signature is the MinHash signature of the xxh3 hashes of its members, with the
min-hashes of :mod:`dedup_store.core.minhash` (``num_perm`` and ``seed`` of the store); the
share of equal positions of two signatures estimates the Jaccard of the two sets.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from dedup_store.core.arrays import U32
from dedup_store.core.fingerprint import Fingerprint
from dedup_store.core.minhash import minhash_signatures
from dedup_store.core.params import FingerprintParams
from dedup_store.errors import InvalidDocumentError


def normalize_member(value: str) -> str:
    """One member as it is compared: NFKC, casefolded, surrounding spaces stripped."""
    return unicodedata.normalize("NFKC", value).casefold().strip()


def meta_members(meta: Mapping[str, Any] | None, fields: Sequence[str]) -> list[str]:
    """The sorted distinct members ``field:value`` of ``meta`` in ``fields`` (empty: none).

    Raises:
        InvalidDocumentError: ``meta`` is no mapping, or a named field holds something other
            than a string or a list of strings.
    """
    if meta is not None and not isinstance(meta, Mapping):
        raise InvalidDocumentError(f"meta must be a mapping, got {type(meta).__name__}")
    if not meta or not fields:
        return []
    members: set[str] = set()
    for field in fields:
        value = meta.get(field)
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InvalidDocumentError(
                f"meta field {field!r} must be a string or a list of strings, "
                f"got {type(value).__name__}"
            )
        members.update(f"{field}:{m}" for m in map(normalize_member, values) if m)
    return sorted(members)


def member_hashes(members: Sequence[str]) -> npt.NDArray[np.uint64]:
    """The sorted 64-bit xxh3 hashes of ``members``."""
    hashes = np.fromiter(
        (xxhash.xxh3_64_intdigest(m.encode("utf-8")) for m in members), np.uint64, len(members)
    )
    return np.unique(hashes)


@dataclasses.dataclass(frozen=True)
class MetaSignatures:
    """The signatures of the metadata sets of a batch's rows.

    Attributes:
        signatures: ``uint32`` array ``(rows, num_perm)``; rows without a metadata set are 0.
        present: whether each row has a metadata set.
    """

    signatures: U32
    present: npt.NDArray[np.bool_]

    def row(self, i: int) -> U32 | None:
        """The signature of row ``i``, ``None`` when it has no metadata set."""
        return self.signatures[i] if self.present[i] else None


def meta_signatures(members: Sequence[Sequence[str]], params: FingerprintParams) -> MetaSignatures:
    """The signatures of many metadata sets (:func:`meta_members` of each document), computed
    in one batch."""
    sets = [member_hashes(m) for m in members]
    present = np.array([len(s) > 0 for s in sets], dtype=bool)
    signatures = np.zeros((len(sets), params.num_perm), dtype=np.uint32)
    kept = [s for s in sets if len(s)]
    if kept:
        offsets = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in kept], out=offsets[1:])
        signatures[present] = minhash_signatures(
            np.concatenate(kept), offsets, params.num_perm, params.seed
        )
    return MetaSignatures(signatures, present)


def exact_key(exact_hash: bytes, members: Sequence[str]) -> bytes:
    """The exact-duplicate key of a document with metadata ``members``: its text's exact hash
    when it has none, else the 128-bit xxh3 of that hash and the members, so that exact copies
    (linked to the first of their group, ``exact_of``) share their metadata set too."""
    if not members:
        return exact_hash
    return xxhash.xxh3_128_digest(exact_hash + "\x00".join(members).encode("utf-8"))


def with_meta(fp: Fingerprint, meta: Mapping[str, Any] | None) -> tuple[Fingerprint, U32 | None]:
    """``fp`` with the exact key of a document with ``meta`` (:func:`exact_key`), and the
    signature of its metadata set (``None``: it has none).

    Raises:
        InvalidDocumentError: as :func:`meta_members`.
    """
    members = meta_members(meta, fp.params.meta_fields)
    if not members:
        return fp, None
    keyed = dataclasses.replace(fp, exact_hash=exact_key(fp.exact_hash, members))
    return keyed, meta_signatures([members], fp.params).row(0)
