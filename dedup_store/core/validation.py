"""Checks of a document's text before it is fingerprinted: a string, valid UTF-8, no NUL
character, not too large."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from dedup_store.errors import InvalidDocumentError

#: Documents larger than this (UTF-8 bytes) are refused.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


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

    A batch of strings whose concatenation is valid and at most ``max_bytes`` bytes is checked in
    a few passes over that concatenation; otherwise text by text.

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
    """Whether all ``texts`` are strings whose concatenation is valid and fits ``max_bytes``."""
    try:
        joined = "".join(cast("Sequence[str]", texts))
    except TypeError:
        return False
    if "\x00" in joined:
        return False
    if joined.isascii():
        return len(joined) <= max_bytes
    try:
        return len(joined.encode("utf-8")) <= max_bytes
    except UnicodeEncodeError:
        return False
