"""Integer arrays bound as statement parameters in PostgreSQL's binary array format.

A ``check`` or ``add`` sends a document's signature, shingles and keys as arrays of a few
dozen integers each; a batch sends its keys, candidate pairs and the ids it reads as arrays of
up to hundreds of thousands. As text (``{1,2,...}``) they cost the client a ``str`` of every
element and the server a parse of every digit; here numpy writes the binary form of the whole
array at once and the server reads it as it is. :class:`Int4Array` and :class:`Int8Array` are
lists of the same integers too: a psycopg connection made before this module was imported, which
lacks the binary dumpers registered here on psycopg's global adapters, sends them as lists
(psycopg's own dumper), with the same values.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import adapt, pq
from psycopg.abc import AdaptContext

_HEADER = struct.Struct(">iiIii")  # dimensions, has nulls, element type, length, lower bound
_EMPTY = struct.Struct(">iiI")  # no dimensions: no length, no lower bound


class _IntArray(list[int]):
    """Integers of one numpy array, kept as the array for the binary dumper."""

    __slots__ = ("values",)
    items: np.dtype[np.void]  # each element in the binary format: its length, its value
    element_oid: int

    def __init__(self, values: npt.NDArray[np.integer[Any]]) -> None:
        super().__init__(values.tolist())
        self.values = values

    def binary(self) -> bytes:
        """The array in PostgreSQL's binary format: a header, then each element's length and
        big-endian value."""
        count = len(self.values)
        if not count:
            return _EMPTY.pack(0, 0, self.element_oid)
        items = np.empty(count, dtype=self.items)
        items["size"] = self.items["value"].itemsize
        items["value"] = self.values
        return _HEADER.pack(1, 0, self.element_oid, count, 1) + items.tobytes()


class Int4Array(_IntArray):
    """An ``integer[]`` parameter."""

    __slots__ = ()
    items, element_oid = np.dtype([("size", ">i4"), ("value", ">i4")]), 23


class Int8Array(_IntArray):
    """A ``bigint[]`` parameter."""

    __slots__ = ()
    items, element_oid = np.dtype([("size", ">i4"), ("value", ">i8")]), 20


class _Int4ArrayDumper(adapt.Dumper):
    format = pq.Format.BINARY
    oid = 1007  # integer[]

    def dump(self, obj: Int4Array) -> bytes:
        return obj.binary()


class _Int8ArrayDumper(adapt.Dumper):
    format = pq.Format.BINARY
    oid = 1016  # bigint[]

    def dump(self, obj: Int8Array) -> bytes:
        return obj.binary()


def register(context: AdaptContext | None = None) -> None:
    """Dump :class:`Int4Array` and :class:`Int8Array` in binary on ``context`` (a connection or
    cursor; ``None``: psycopg's global adapters, which connections made later copy)."""
    adapters = psycopg.adapters if context is None else context.adapters
    adapters.register_dumper(Int4Array, _Int4ArrayDumper)
    adapters.register_dumper(Int8Array, _Int8ArrayDumper)


register()
