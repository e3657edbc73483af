"""Checks of a document's text before it is fingerprinted: a string, valid UTF-8, no NUL
character, not too large."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from dedup_store.errors import InvalidDocumentError

#: Documents larger than this (UTF-8 bytes) are refused.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Batches of documents longer than this on average (characters) are checked one document at a
#: time: a copy of their concatenation costs more than a call per document.
_JOINED_MEAN_LENGTH = 1000
_FIRST_FEW = 16


def validate_text(text: object, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Return ``text`` if it can be fingerprinted and stored, else raise a clear error.

    Raises:
        InvalidDocumentError: not a string, a lone surrogate (invalid UTF-8 decoded with
            ``surrogateescape``), a NUL character, or more than ``max_bytes`` bytes.
    """
    if not isinstance(text, str):
        raise InvalidDocumentError(f"document text must be str, got {type(text).__name__}")
    if "\x00" in text:
        raise InvalidDocumentError(
            f"document contains a NUL character at offset {text.index(chr(0))}"
        )
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidDocumentError(f"document is not valid UTF-8 (offset {e.start})") from None
    if size > max_bytes:
        raise InvalidDocumentError(
            f"document is {size} bytes, larger than the limit of {max_bytes} bytes "
            "(max_bytes; --max-bytes raises it)"
        )
    return text


def validate_texts(texts: Sequence[object], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Check every text as :func:`validate_text` does.

    A batch of short strings whose concatenation is valid, none of them longer than a quarter of
    ``max_bytes`` characters (or than ``max_bytes`` if all are ASCII), is checked in a few passes
    over that concatenation; otherwise text by text.

    Raises:
        InvalidDocumentError: for the first invalid text, naming its position.
    """
    if not _joined_valid(texts, max_bytes):
        for position, text in enumerate(texts):
            try:
                validate_text(text, max_bytes)
            except InvalidDocumentError as e:
                raise InvalidDocumentError(f"document {position}: {e}") from None


def _joined_valid(texts: Sequence[object], max_bytes: int) -> bool:
    """Whether all ``texts`` are short strings whose concatenation is valid and none of which
    can be larger than ``max_bytes`` (a character is at most 4 bytes of UTF-8). Whether they
    are short is judged by the first few."""
    strings = cast("Sequence[str]", texts)
    try:
        first = strings[:_FIRST_FEW]
        if sum(map(len, first)) > _JOINED_MEAN_LENGTH * len(first):
            return False
        joined = "".join(strings)
    except TypeError:
        return False
    if "\x00" in joined:
        return False
    size = len(joined)
    if not joined.isascii():
        try:
            size = len(joined.encode("utf-8"))
        except UnicodeEncodeError:
            return False
    if size <= max_bytes:
        return True
    return (1 if joined.isascii() else 4) * max(map(len, strings)) <= max_bytes
