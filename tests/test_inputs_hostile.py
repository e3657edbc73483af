"""Readers on hostile input: nothing hangs, nothing is lost without a report."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dedup_store.errors import InputFormatError
from dedup_store.ingest.inputs import RepeatedIds, read_csv, read_inputs, read_jsonl
from dedup_store.results import Document

DEEP = '{"id": "deep", "text": "t", "m": ' + "[" * 100_000 + "]" * 100_000 + "}"


def finish_within(seconds: float, work: Callable[[], Any]) -> Any:
    """Run ``work`` in a daemon thread; fail (instead of hanging the suite) if it blocks."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return box[0]


def split(records: Iterator[Any]) -> tuple[list[Document], list[InputFormatError]]:
    items = list(records)
    return (
        [r for r in items if isinstance(r, Document)],
        [r for r in items if isinstance(r, InputFormatError)],
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "n", "text": "t", "score": NaN}', "JSON holds NaN"),
        ('{"id": "i", "text": "t", "score": -Infinity}', "JSON holds -Infinity"),
        ('{"id": ' + "7" * 5000 + ', "text": "t"}', "number too long"),
        (DEEP, "nested too deeply"),
    ],
)
def test_jsonl_unreadable_values_are_record_errors(line: str, message: str) -> None:
    good = json.dumps({"id": "ok", "text": "fine"})
    body = f"{good}\n{line}\n{good.replace('ok', 'ok2')}\n".encode()
    found, bad = split(read_jsonl(io.BytesIO(body), "f.jsonl"))
    assert [d.id for d in found] == ["ok", "ok2"]
    assert [(e.source, e.line) for e in bad] == [("f.jsonl", 2)]
    assert message in str(bad[0])


def test_jsonl_lone_surrogates_reach_the_store_validation() -> None:
    # "\ud800" is valid JSON text but not valid Unicode: the store rejects it with this line
    body = b'{"id": "a\\ud800", "text": "t"}\n{"id": "b", "text": "t", "m": "\\udfff"}\n'
    found, bad = split(read_jsonl(io.BytesIO(body), "f.jsonl"))
    assert (len(found), bad) == (2, [])
    assert [d.line for d in found] == [1, 2]


def test_csv_unterminated_quote_is_reported_where_the_row_starts() -> None:
    body = b'id,text\n1,"first"\n2,"never closed\n3,third\n4,fourth\n'
    found, bad = split(read_csv(io.BytesIO(body), "f.csv"))
    assert [d.id for d in found] == ["1"]
    assert [(e.source, e.line) for e in bad] == [("f.csv", 3)]
    assert "never closed (lines 3-5" in str(bad[0])


def test_csv_goes_on_after_a_malformed_row() -> None:
    body = b'id,text\n1,"a"b\n2,fine\n'
    found, bad = split(read_csv(io.BytesIO(body), "f.csv"))
    assert [d.id for d in found] == ["2"]
    assert [(e.line, "malformed CSV" in str(e)) for e in bad] == [(2, True)]


def test_fifo_in_a_tree_is_reported_not_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    os.mkfifo(tmp_path / "x.txt")  # nobody ever writes to it: opening it to read would block
    (tmp_path / "z.txt").write_text("zeta")
    found, bad = finish_within(10, lambda: split(read_inputs([str(tmp_path)])))
    assert [d.id for d in found] == ["a.txt", "z.txt"]
    assert [e.source for e in bad] == [str(tmp_path / "x.txt")]
    assert "not a regular file (a FIFO)" in str(bad[0])


def test_fifo_given_as_a_path_is_an_error_record(tmp_path: Path) -> None:
    fifo = tmp_path / "docs.jsonl"
    os.mkfifo(fifo)
    found, bad = finish_within(10, lambda: split(read_inputs([str(fifo), "/dev/null"])))
    assert found == []
    assert [e.source for e in bad] == [str(fifo), "/dev/null"]
    assert "a FIFO" in str(bad[0]) and "standard input" in str(bad[0])
    assert "a character device" in str(bad[1])


def deep_tree(root: Path, levels: int = 40) -> Path:
    """Directories nested so deep that their path is longer than the system allows (PATH_MAX).

    Listing the deepest one by its path fails with ENAMETOOLONG, even for root; they are made
    relative to an open directory, as a path that long cannot be used.
    """
    name = "d" * 200
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("doc.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
            f.write("lost unless reported")
    finally:
        os.close(fd)
    return root


def test_directory_that_cannot_be_listed_is_reported(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    root = deep_tree(tmp_path / "tree")
    (root / "top.txt").write_text("top")
    found, bad = split(read_inputs([str(root)]))
    assert [d.id for d in found] == ["top.txt"]
    assert len(bad) == 1
    assert "cannot read the directory: file name too long" in str(bad[0])
    assert bad[0].source.startswith(str(root / ("d" * 200)))


def test_repeated_ids_are_reported_with_both_places() -> None:
    body = b'{"id": 1, "text": "a"}\n{"id": "2", "text": "b"}\n{"id": "1", "text": "c"}\n'
    messages: list[str] = []
    repeats = RepeatedIds(messages.append)
    documents = [d for d in read_jsonl(io.BytesIO(body), "f.jsonl") if isinstance(d, Document)]
    assert [d.text for d in repeats.watch(documents)] == ["a", "b", "c"]
    assert repeats.count == 1
    assert messages == ["f.jsonl:3: id '1' repeats the id of f.jsonl:1; this copy is skipped"]
    again = RepeatedIds(messages.append, update=True)
    assert len(list(again.watch(documents + documents))) == 6
    assert again.count == 4
    assert messages[-1].endswith("this copy replaces it")


def test_stdin_text_takes_the_given_id() -> None:
    [doc] = read_inputs(["-"], stdin_format="text", stdin=io.BytesIO(b"hello"), stdin_id="note-7")
    assert isinstance(doc, Document)
    assert (doc.id, doc.text) == ("note-7", "hello")
