"""Inputs that used to blow up: many identical copies, and one huge document.

``python -m benchmarks.hot_inputs`` ingests k identical copies of one real text (a Debian
copyright file) for several k, beside as many distinct documents, and reports the time, docs/s
and the rows the copies add (documents, edges, excerpt keys): the rows must grow linearly with
k. Then it times ``check`` of a ~2 MB document (the copyright files of the machine joined)
against that store, and the ingest of that document.
"""

from __future__ import annotations

import argparse
import glob
import time
from collections.abc import Sequence

import sqlalchemy as sa

from benchmarks.common import add_url, scratch_schema, sqlalchemy_url
from dedup_store import DedupStore

COPYRIGHT = "/usr/share/doc/*/copyright"


def _texts() -> list[str]:
    texts = []
    for path in sorted(glob.glob(COPYRIGHT)):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts


def _rows(engine: sa.Engine, schema: str) -> tuple[int, int, int]:
    with engine.connect() as conn:
        return tuple(  # type: ignore[return-value]
            int(conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".{t}')).scalar_one())
            for t in ("documents", "edges", "sample_keys")
        )


def copies(url: str, counts: Sequence[int], texts: list[str]) -> None:
    """Ingest k copies of one text, and k distinct texts, into fresh stores."""
    engine = sa.create_engine(url)
    original = max(texts[:50], key=len)
    print(f"the copied text: {len(original.encode()):,} bytes\n")
    print("| input | k | seconds | docs/s | documents | edges | excerpt keys |")
    print("|---|---|---|---|---|---|---|")
    for k in counts:
        for label, docs in (
            ("identical copies", [original] * k),
            (
                "near copies (text + its number)",
                [texts[i % len(texts)] + f" copy {i}" for i in range(k)],
            ),
        ):
            schema = "bench_hot_inputs"
            with scratch_schema(engine, schema):
                with DedupStore(url, schema=schema) as store:
                    start = time.perf_counter()
                    store.ingest((f"d{i}", t) for i, t in enumerate(docs))
                    seconds = time.perf_counter() - start
                documents, edges, samples = _rows(engine, schema)
            print(
                f"| {label} | {k:,} | {seconds:.2f} | {k / seconds:,.0f} | {documents:,} "
                f"| {edges:,} | {samples:,} |"
            )
    engine.dispose()


def huge(url: str, texts: list[str], size: int) -> None:
    """``check`` and ``add`` of one ~``size``-byte document against the copyright store."""
    engine = sa.create_engine(url)
    schema = "bench_hot_inputs_huge"
    body = ""
    for text in texts:
        if len(body) >= size:
            break
        body += text + "\n\n"
    body = body[:size]
    try:
        with scratch_schema(engine, schema), DedupStore(url, schema=schema) as store:
            store.ingest((f"t{i}", t) for i, t in enumerate(texts))
            times = []
            for _ in range(3):
                start = time.perf_counter()
                result = store.check(body)
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            store.add("huge", body)
            added = time.perf_counter() - start
        print(
            f"\ncheck of a {len(body.encode()) / 2**20:.1f} MB document against {len(texts)} "
            f"stored: best {min(times):.2f} s, worst {max(times):.2f} s "
            f"({len(result.matches)} matches); add {added:.2f} s"
        )
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_url(parser, None)
    parser.add_argument("--copies", default="1000,2000,4000")
    parser.add_argument("--huge-bytes", type=int, default=2 * 2**20)
    args = parser.parse_args(argv)
    url = sqlalchemy_url(args.url)
    texts = _texts()
    copies(url, [int(k) for k in args.copies.split(",")], texts)
    huge(url, texts, args.huge_bytes)


if __name__ == "__main__":
    main()
