"""The input readers on small files."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import IO, cast

import pytest

from dedup_store.errors import InputFormatError
from dedup_store.ingest.inputs import (
    Record,
    apply_error_policy,
    format_for,
    iter_files,
    parse_globs,
    read_csv,
    read_inputs,
    read_jsonl,
)
from dedup_store.results import Document


def docs(records: list[Record]) -> list[Document]:
    return [r for r in records if isinstance(r, Document)]


def errors(records: list[Record]) -> list[InputFormatError]:
    return [r for r in records if isinstance(r, InputFormatError)]


def test_format_by_suffix() -> None:
    assert format_for("a/b.jsonl") == "jsonl"
    assert format_for("x.NDJSON") == "jsonl"
    assert format_for("x.csv") == "csv"
    assert format_for("x.html") == "text"
    assert format_for("x") == "text"


def test_parse_globs() -> None:
    assert parse_globs("*.txt, *.md,,") == ["*.txt", "*.md"]
    assert parse_globs(["*.txt,*.md", "*.htm"]) == ["*.txt", "*.md", "*.htm"]


def test_text_file_is_one_document_with_path_as_id(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("héllo\nwörld\n", encoding="utf-8")
    [doc] = list(read_inputs([str(path)]))
    assert isinstance(doc, Document)
    assert doc.id == str(path)
    assert doc.text == "héllo\nwörld\n"
    assert doc.meta is None


def test_directory_is_recursive_sorted_and_filtered(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "b.TXT").write_text("b")
    (tmp_path / "a.htm").write_text("a")
    (tmp_path / "README.md").write_text("not a document by default")
    (tmp_path / "sub" / "c.html").write_text("<p>c</p>")
    (tmp_path / "sub" / "deeper" / "d.txt").write_text("d")
    (tmp_path / "sub" / "feed.jsonl").write_text('{"id": "post-1", "text": "p"}\n')
    (tmp_path / "skip.bin").write_bytes(b"\xff\x00")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "e.txt").write_text("e")
    records = list(read_inputs([str(tmp_path)]))
    assert not errors(records)
    assert [d.id for d in docs(records)] == [
        "a.htm",
        "b.TXT",
        "sub/c.html",
        "post-1",
        "sub/deeper/d.txt",
    ]
    assert [d.text for d in docs(records)] == ["a", "b", "<p>c</p>", "p", "d"]
    only_txt = list(read_inputs([str(tmp_path)], glob="*.txt"))
    assert [d.id for d in docs(only_txt)] == ["b.TXT", "sub/deeper/d.txt"]
    with_md = list(read_inputs([str(tmp_path)], glob="*.md"))
    assert [d.id for d in docs(with_md)] == ["README.md"]


def test_text_file_with_bad_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"line one\nline two\nthree \xff\xfe here\n")
    [err] = list(read_inputs([str(path)]))
    assert isinstance(err, InputFormatError)
    assert (err.source, err.line) == (str(path), 3)
    assert "invalid UTF-8" in str(err)
    assert str(err).startswith(f"{path}:3: ")


def test_text_file_with_nul_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "nul.txt"
    path.write_bytes(b"ok\nbad \x00 byte\n")
    [err] = list(read_inputs([str(path)]))
    assert isinstance(err, InputFormatError)
    assert err.line == 2
    assert "NUL" in str(err)


def test_missing_path_is_an_error_record(tmp_path: Path) -> None:
    [err] = list(read_inputs([str(tmp_path / "nope.txt")]))
    assert isinstance(err, InputFormatError)
    assert "no such file" in str(err)


def test_jsonl_fields_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": "a", "text": "alpha", "lang": "en", "tags": ["x"]},
        {"id": 7, "text": "seven"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    records = list(read_inputs([str(path)]))
    assert not errors(records)
    a, b = docs(records)
    assert (a.id, a.text, a.meta, a.line) == ("a", "alpha", {"lang": "en", "tags": ["x"]}, 1)
    assert (b.id, b.text, b.meta, b.line) == ("7", "seven", None, 2)
    assert a.source == str(path)


def test_jsonl_custom_fields(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"key": "k1", "body": "text", "id": "kept"}) + "\n")
    [doc] = list(read_inputs([str(path)], id_field="key", text_field="body"))
    assert isinstance(doc, Document)
    assert (doc.id, doc.text, doc.meta) == ("k1", "text", {"id": "kept"})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"id": "x", "text": ', "malformed JSON"),
        (b'["id", "text"]', "expected a JSON object, got an array"),
        (b'{"text": "t"}', "missing id field 'id'"),
        (b'{"id": "x"}', "missing text field 'text'"),
        (b'{"id": "x", "text": 5}', "must be a string, got a number"),
        (b'{"id": null, "text": "t"}', "must be a string or integer"),
        (b'{"id": " ", "text": "t"}', "is empty"),
        (b'{"id": "x", "text": "a\\u0000b"}', "NUL character"),
        (b'{"id": "x", "text": "caf\xe9"}', "invalid UTF-8 (bytes e9 22 7d 0a)"),
    ],
)
def test_jsonl_bad_lines_are_reported_with_line(line: bytes, message: str) -> None:
    data = b'{"id": "ok1", "text": "fine"}\n' + line + b'\n{"id": "ok2", "text": "fine"}\n'
    records = list(read_jsonl(io.BytesIO(data), "in.jsonl"))
    assert [d.id for d in docs(records)] == ["ok1", "ok2"]
    [err] = errors(records)
    assert (err.source, err.line) == ("in.jsonl", 2)
    assert message in str(err)


def test_jsonl_byte_order_mark_is_ignored() -> None:
    records = list(read_jsonl(io.BytesIO(b'\xef\xbb\xbf{"id": "a", "text": "t"}\n'), "bom.jsonl"))
    assert [d.id for d in docs(records)] == ["a"]


def test_csv_rows_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text('id,title,text\n1,One,"first\nspans lines"\n2,Two,second\n', encoding="utf-8")
    records = list(read_inputs([str(path)]))
    assert not errors(records)
    a, b = docs(records)
    assert (a.id, a.text, a.meta, a.line) == ("1", "first\nspans lines", {"title": "One"}, 2)
    assert (b.id, b.text, b.line) == ("2", "second", 4)


def test_csv_wrong_column_count_names_line() -> None:
    data = b"id,text\na,alpha\nb,beta,extra\nc,gamma\n"
    records = list(read_csv(io.BytesIO(data), "in.csv"))
    assert [d.id for d in docs(records)] == ["a", "c"]
    [err] = errors(records)
    assert err.line == 3
    assert "expected 2 fields" in str(err)


def test_csv_bad_bytes_names_line() -> None:
    data = b'id,text\na,alpha\nb,"be\n\xfftA"\nc,gamma\n'
    records = list(read_csv(io.BytesIO(data), "in.csv"))
    assert [d.id for d in docs(records)] == ["a", "c"]
    [err] = errors(records)
    assert err.line == 4
    assert "invalid UTF-8 (bytes ff 74 41)" in str(err)


def test_csv_header_without_text_column() -> None:
    [err] = list(read_csv(io.BytesIO(b"id,body\n1,x\n"), "in.csv"))
    assert isinstance(err, InputFormatError)
    assert err.line == 1
    assert "no column 'text'" in str(err)


def test_csv_large_field() -> None:
    big = "word " * 60_000
    data = f"id,text\nbig,{big}\n".encode()
    [doc] = list(read_csv(io.BytesIO(data), "big.csv"))
    assert isinstance(doc, Document)
    assert doc.text == big


def test_stdin_formats() -> None:
    jsonl = list(read_inputs(["-"], stdin=io.BytesIO(b'{"id": "s", "text": "t"}\n')))
    assert [d.id for d in docs(jsonl)] == ["s"]
    assert docs(jsonl)[0].source == "<stdin>"
    text = list(read_inputs(["-"], stdin_format="text", stdin=io.BytesIO(b"whole\nstream")))
    assert [(d.id, d.text) for d in docs(text)] == [("stdin", "whole\nstream")]
    csv_ = list(read_inputs(["-"], stdin_format="csv", stdin=io.BytesIO(b"id,text\n1,x\n")))
    assert [d.id for d in docs(csv_)] == ["1"]


def test_readers_stream_lazily() -> None:
    # Endless input: a reader that read it whole would never return.
    jsonl_lines = itertools.repeat(b'{"id": "x", "text": "t"}\n')
    first = next(read_jsonl(cast(IO[bytes], jsonl_lines), "endless.jsonl"))
    assert isinstance(first, Document)
    csv_lines = itertools.chain([b"id,text\n"], itertools.repeat(b"x,t\n"))
    row = next(read_csv(cast(IO[bytes], csv_lines), "endless.csv"))
    assert isinstance(row, Document)


def test_apply_error_policy() -> None:
    bad = InputFormatError("broken", "f.jsonl", 2)
    records: list[Record] = [Document("a", "x"), bad, Document("b", "y")]
    seen: list[InputFormatError] = []
    kept = list(apply_error_policy(records, "skip", seen.append))
    assert [d.id for d in kept] == ["a", "b"]
    assert seen == [bad]
    stopped = apply_error_policy(records, "stop")
    assert next(stopped).id == "a"
    with pytest.raises(InputFormatError, match=r"f\.jsonl:2: broken"):
        next(stopped)


def test_files_are_read_originals_first_and_numbers_by_value(tmp_path: Path) -> None:
    names = ["post-10.txt", "post-repost.txt", "post.txt", "post-2.txt", "Post.md"]
    for name in names:
        (tmp_path / name).write_text("x")
    found = [p.name for p in iter_files(tmp_path, ["*"]) if isinstance(p, Path)]
    assert found == ["Post.md", "post.txt", "post-2.txt", "post-10.txt", "post-repost.txt"]
