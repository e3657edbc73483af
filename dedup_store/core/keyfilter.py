"""A filter of keys: which keys of a slot a set of documents may hold, and which it surely does not.

A split block Bloom filter (the layout of Parquet's): blocks of eight 32-bit words, one bit of
each word set per key, the block and the bits taken from ``mix64(key ^ salt)``, where the salt
names the key's kind and slot (:func:`slot_salt`), so equal keys of two slots are unrelated. At
:data:`BITS_PER_KEY` bits a key, about one key in a hundred that was never added is taken for
one that was; a key that was added always is.

The store keeps one over the settled tier's keys (:mod:`dedup_store.db.candidates.settled_filter`):
an ingest asks the settled tier's indexes only for the keys it may hold.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U32
from dedup_store.core.mixing import mix64

#: Bits of the filter per key added: about 1 % of absent keys pass.
BITS_PER_KEY = 10

_WORDS_PER_BLOCK = 8
_BYTES_PER_BLOCK = 4 * _WORDS_PER_BLOCK
_MAX_BLOCKS = (1 << 32) - 1


class KeyFilter:
    """A split block Bloom filter of band and block keys, slot by slot.

    Attributes:
        words: the filter, eight ``uint32`` words a block.
        count: the keys added (a key added twice counts twice).
    """

    def __init__(self, words: U32, count: int = 0) -> None:
        if len(words) % _WORDS_PER_BLOCK or not 0 < len(words) // 8 <= _MAX_BLOCKS:
            raise ValueError("a key filter is 1 to 2**32 - 1 blocks of eight uint32 words")
        self.words = words
        self.count = count

    @classmethod
    def sized(cls, keys: int, bits_per_key: int = BITS_PER_KEY) -> KeyFilter:
        """An empty filter for ``keys`` keys."""
        blocks = -(-max(int(keys), 1) * bits_per_key // (8 * _BYTES_PER_BLOCK))
        return cls(np.zeros(min(blocks, _MAX_BLOCKS) * _WORDS_PER_BLOCK, dtype=np.uint32))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, count: int) -> KeyFilter:
        """The filter of ``count`` keys whose :meth:`to_bytes` is ``data``."""
        return cls(np.frombuffer(data, dtype="<u4").astype(np.uint32), count)

    def to_bytes(self) -> bytes:
        """The words, little-endian."""
        return self.words.astype("<u4").tobytes()

    @property
    def nbytes(self) -> int:
        """The size of the filter in bytes."""
        return int(self.words.nbytes)

    def room(self, bits_per_key: int = BITS_PER_KEY) -> int:
        """How many more keys it takes at ``bits_per_key`` bits a key."""
        return max(self.nbytes * 8 // bits_per_key - self.count, 0)

    def add(self, kind: int, slot: int, keys: I64) -> None:
        """Add the ``keys`` of ``slot`` of ``kind``."""
        kernels.backend.filter_add(self.words, keys.view(np.uint64), slot_salt(kind, slot))
        self.count += len(keys)

    def has(self, kind: int, slot: int, keys: I64) -> npt.NDArray[np.bool_]:
        """Per key of ``keys`` of ``slot`` of ``kind``: ``False`` if it was never added, ``True``
        if it was (or, about one time in a hundred, if it was not)."""
        return kernels.backend.filter_has(self.words, keys.view(np.uint64), slot_salt(kind, slot))


def slot_salt(kind: int, slot: int) -> int:
    """The salt of the keys of ``slot`` of ``kind`` (a 64-bit hash of both)."""
    return int(mix64(np.array([(int(kind) << 32) | int(slot)], dtype=np.uint64))[0])
