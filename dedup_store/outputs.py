"""Files the store writes (a report, a dump): written beside their target and renamed over it
when complete, and only over a regular file."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from dedup_store.errors import OutputError


def writable_target(path: Path, what: str) -> Path:
    """The file to replace for ``path``: itself, or the file a symbolic link names.

    Raises:
        OutputError: it exists and is not a regular file (a device, a FIFO, a folder), or its
            folder does not exist.
    """
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not target.is_file():
        raise OutputError(f"{path} is not a regular file: write {what} to a file")
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {what} to {path}: no folder {target.parent}")
    return target


@contextlib.contextmanager
def written_beside(path: Path, what: str) -> Iterator[Path]:
    """A path beside the file ``path`` names (:func:`writable_target`) to write ``what`` into:
    renamed over that file when the block ends, removed when it raises.

    Raises:
        OutputError: ``path`` is refused, or the file cannot be written or renamed.
    """
    target = writable_target(path, what)
    partial = target.with_name(f".{target.name}.partial")
    try:
        yield partial
        partial.replace(target)
    except OSError as e:
        raise OutputError(f"cannot write {what} to {path}: {e.strerror or e}") from e
    finally:
        partial.unlink(missing_ok=True)
