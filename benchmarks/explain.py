"""Word-level alignment (what ``dedup-store explain`` shows) of two long documents, in one run.

Documents of about ``--size`` bytes (2 MB) are made of real text, then a copy of each is edited
with a seeded random generator: ``--word-rate`` of the words substituted, inserted after or
deleted (1 %), ``--moves`` paragraphs moved elsewhere (10) and a section of ``--deleted`` of the
paragraphs left out (2 %). The pairs:

* ``copyright``: every ``/usr/share/doc/*/copyright`` file in turn (templated text: the same
  licences again and again) against its edited copy;
* ``man``: English manual pages rendered as text (cached, see
  :data:`benchmarks.realtext_corpus.CACHE`) against its edited copy;
* ``shuffled``: the manual pages against the same paragraphs in a random order;
* ``unrelated``: the copyright text against the manual pages;
* ``one word``: the same word repeated (as many words as the copyright text has, about
  300,000) against a copy with ``--word-rate`` of them replaced by another word (the worst case
  of repetition).

For each, :func:`dedup_store.core.align.align_texts` is timed (best of ``--repeat``; reading
the words and the diff), and :class:`difflib.SequenceMatcher` (``autojunk=False``, the exact
longest-matching-block diff) runs on the same normalized words in a child process, for at most
``--difflib-timeout`` seconds; it is quadratic, so it gets the first ``--difflib-words`` words
of each side, and our diff is timed on those same words for the ratio. With ``--difflib-full
SECONDS`` difflib also runs on the whole documents with its default ``autojunk`` heuristic
(words in more than 1 % of positions are ignored: faster, and blind to them). Run it as
``python -m benchmarks.explain``.
"""

from __future__ import annotations

import argparse
import difflib
import multiprocessing
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from queue import Empty

import sqlalchemy as sa

from benchmarks.common import add_seed, add_url, drop_schema
from benchmarks.quality_corpus import read_text
from benchmarks.realtext_corpus import MAN_PAGES, MAN_SECTIONS, man_pages, rendered
from dedup_store.core.align import align_texts, text_words
from dedup_store.core.seqdiff import BUDGET_PER_TOKEN, diff_tokens

_SPACE = re.compile(r"(\s+)")


def copyright_text(size: int) -> str:
    """The copyright files of ``/usr/share/doc`` in turn, up to ``size`` characters."""
    paths = sorted(Path("/usr/share/doc").glob("*/copyright"))
    return _joined((read_text(p) for p in paths if p.is_file()), size)


def man_text(size: int, seed: int) -> str:
    """English manual pages rendered as text (a seeded sample), up to ``size`` characters."""
    pages = man_pages(MAN_SECTIONS, MAN_PAGES, seed)
    return _joined(_rendered_in_turn(pages), size)


def _rendered_in_turn(pages: Sequence[Path]) -> Iterator[str]:
    """The pages rendered, a hundred at a time (only as many as are read)."""
    for start in range(0, len(pages), 100):
        yield from rendered(pages[start : start + 100])


def _joined(texts: Iterable[str], size: int) -> str:
    parts: list[str] = []
    total = 0
    for text in texts:
        parts.append(text.strip())
        total += len(parts[-1]) + 2
        if total >= size:
            break
    return "\n\n".join(parts)[:size]


def edited(text: str, rng: random.Random, word_rate: float, moves: int, deleted: float) -> str:
    """A copy of ``text`` with words edited, paragraphs moved and a section deleted."""
    vocabulary = text.split()[:20_000]
    paragraphs = [_edit_words(p, rng, word_rate, vocabulary) for p in text.split("\n\n")]
    cut = int(len(paragraphs) * deleted)
    if cut:
        start = rng.randrange(len(paragraphs) - cut)
        del paragraphs[start : start + cut]
    for _ in range(moves):
        moved = paragraphs.pop(rng.randrange(len(paragraphs)))
        paragraphs.insert(rng.randrange(len(paragraphs) + 1), moved)
    return "\n\n".join(paragraphs)


def _shuffled(text: str, rng: random.Random) -> str:
    """``text`` with its paragraphs in a random order."""
    paragraphs = text.split("\n\n")
    rng.shuffle(paragraphs)
    return "\n\n".join(paragraphs)


def _edit_words(paragraph: str, rng: random.Random, rate: float, vocabulary: list[str]) -> str:
    """Substitute, insert after or delete (equally likely) a ``rate`` share of the words."""
    pieces = _SPACE.split(paragraph)
    for k in range(0, len(pieces), 2):
        if pieces[k] and rng.random() < rate:
            action = rng.randrange(3)
            if action == 0:
                pieces[k] = rng.choice(vocabulary)
            elif action == 1:
                pieces[k] += " " + rng.choice(vocabulary)
            else:
                pieces[k] = ""
    return "".join(pieces)


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    """Seconds of the fastest of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _difflib_child(
    a: list[str], b: list[str], autojunk: bool, out: multiprocessing.Queue[tuple[float, int]]
) -> None:
    start = time.perf_counter()
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=autojunk).get_opcodes()
    shared = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag == "equal")
    out.put((time.perf_counter() - start, shared))


def difflib_run(
    a: list[str], b: list[str], timeout: float, autojunk: bool = False
) -> tuple[float, int] | None:
    """``(seconds, equal words)`` of difflib on ``a`` and ``b`` in a child process; ``None``
    past ``timeout`` seconds."""
    queue: multiprocessing.Queue[tuple[float, int]] = multiprocessing.Queue()
    child = multiprocessing.Process(target=_difflib_child, args=(a, b, autojunk, queue))
    child.start()
    try:
        return queue.get(timeout=timeout)
    except Empty:
        return None
    finally:
        child.terminate()
        child.join()


def measure(name: str, a: str, b: str, args: argparse.Namespace) -> str:
    """One line of figures for the pair ``a``, ``b``."""
    seconds = best_seconds(lambda: align_texts(a, b, html="never"), args.repeat)
    alignment = align_texts(a, b, html="never")
    keys_a, keys_b = text_words(a).keys, text_words(b).keys
    diff = diff_tokens(keys_a, keys_b)
    diff_seconds = best_seconds(lambda: diff_tokens(keys_a, keys_b), args.repeat)
    head_a, head_b = keys_a[: args.difflib_words], keys_b[: args.difflib_words]
    ours_head = best_seconds(lambda: diff_tokens(head_a, head_b), args.repeat)
    theirs = difflib_run(head_a, head_b, args.difflib_timeout)
    line = (
        f"{name:<10}{len(a) / 1e6:>5.2f} MB{alignment.words_a:>9,}{alignment.words_b:>9,}"
        f"{seconds:>8.3f}{diff_seconds:>7.3f}{_share(alignment.shared_words, keys_a):>8}"
        f"{len(alignment.runs):>7,}{diff.operations / (len(keys_a) + len(keys_b)):>6.1f}"
        f"{_yes(diff.exhausted):>6}{ours_head:>9.4f}"
    )
    if theirs is None:
        limit = args.difflib_timeout
        line += f"{f'> {limit:.0f}':>9}{f'> {_times(limit / ours_head)}':>11}"
    else:
        line += f"{theirs[0]:>9.3f}{_times(theirs[0] / ours_head):>11}"
    if args.difflib_full:
        full = difflib_run(keys_a, keys_b, args.difflib_full, autojunk=True)
        line += (
            f"   whole, autojunk: > {args.difflib_full:.0f} s"
            if full is None
            else f"   whole, autojunk: {full[0]:.1f} s, {_share(full[1], keys_a)} shared, "
            f"{_times(full[0] / seconds)}"
        )
    return line


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}x"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _share(words: int, keys: list[str]) -> str:
    return f"{words / max(1, len(keys)):.1%}"


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, build the documents, print one line per pair."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=2_000_000, help="characters per document")
    add_seed(parser, 1, "seed of the edits and man pages")
    parser.add_argument("--word-rate", type=float, default=0.01, help="share of words edited")
    parser.add_argument("--moves", type=int, default=10, help="paragraphs moved")
    parser.add_argument("--deleted", type=float, default=0.02, help="share of paragraphs cut")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best is kept)")
    parser.add_argument(
        "--difflib-words", type=int, default=20_000, help="words per side given to difflib"
    )
    parser.add_argument(
        "--difflib-timeout", type=float, default=60.0, help="seconds difflib may take"
    )
    parser.add_argument(
        "--difflib-full",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="also run difflib with its default autojunk heuristic on the whole documents, "
        "for at most this many seconds (it takes minutes; default: not run)",
    )
    add_url(
        parser,
        "a PostgreSQL URL: also time DedupStore.explain of the copyright pair stored there "
        "(in a schema of its own, dropped after)",
        fallback="",
    )
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    copyrights = copyright_text(args.size)
    manuals = man_text(args.size, args.seed)
    words = len(text_words(copyrights).keys)
    repeated = " ".join(["word"] * words)
    replaced = " ".join("other" if rng.random() < args.word_rate else "word" for _ in range(words))
    pairs = {
        "copyright": (
            copyrights,
            edited(copyrights, rng, args.word_rate, args.moves, args.deleted),
        ),
        "man": (manuals, edited(manuals, rng, args.word_rate, args.moves, args.deleted)),
        "shuffled": (manuals, _shuffled(manuals, rng)),
        "unrelated": (copyrights, manuals),
        "one word": (repeated, replaced),
    }
    print(
        f"edits: {args.word_rate:.0%} of words, {args.moves} paragraphs moved, "
        f"{args.deleted:.0%} of paragraphs deleted; seed {args.seed}; best of {args.repeat}; "
        f"difflib (autojunk=False) on the first {args.difflib_words:,} words of each side"
    )
    print(
        "align: align_texts in all (reading the words and the diff), diff: diff_tokens alone; "
        "shared: words of a in equal runs; ops/w: operations per word of both (budget "
        f"{BUDGET_PER_TOKEN}), spent: budget spent; first words: diff_tokens and difflib on the "
        "first words, their ratio"
    )
    print(
        f"{'pair':<10}{'size':>8}{'words a':>9}{'words b':>9}{'align s':>8}{'diff s':>7}"
        f"{'shared':>8}{'runs':>7}{'ops/w':>6}{'spent':>6}{'ours s':>9}{'difflib':>9}{'ratio':>11}"
    )
    for name, (a, b) in pairs.items():
        print(measure(name, a, b, args), flush=True)
    if args.url:
        a, b = pairs["copyright"]
        print(explain_in_store(args.url, a, b, args.repeat), flush=True)


def explain_in_store(url: str, text_a: str, text_b: str, repeat: int) -> str:
    """``DedupStore.explain`` of the two documents stored in a store that keeps texts: the
    reads, the scores and the alignment, as ``dedup-store explain`` runs them."""
    from dedup_store import DedupStore
    from dedup_store.config import normalize_url

    schema = f"bench_explain_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(normalize_url(url))
    try:
        limit = 2 * max(len(text_a.encode()), len(text_b.encode()))
        with DedupStore(engine, schema=schema, keep_text=True, max_bytes=limit) as store:
            store.add("a", text_a)
            store.add("b", text_b)
            seconds = best_seconds(lambda: store.explain("a", "b"), repeat)
            found = store.explain("a", "b")
        return (
            f"store explain of the copyright pair: {seconds:.3f} s (best of {repeat}), "
            f"method {found.method}, jaccard {found.jaccard:.3f}, found by "
            f"{', '.join(found.found_by)}, {len(found.alignment.runs) if found.alignment else 0} "
            "runs"
        )
    finally:
        drop_schema(engine, schema)
        engine.dispose()


if __name__ == "__main__":
    main()
