"""A seeded corpus of real text and edited copies of it, for the quality benchmark.

Base documents are cut out of text found on the machine: the license texts in
``/usr/share/common-licenses``, Debian ``copyright`` files, the docstrings of the Python
standard library and rendered manual pages (a few translated ones too, so Cyrillic and CJK text
is present). Each source is split into paragraphs, dedented and re-flowed, and consecutive
paragraphs are grouped into documents of 40-600 words. A base piece whose word trigrams are
mostly in the corpus already is left out, so the hundreds of copies of the same license notice
in ``copyright`` files do not swamp the ground truth with accidental duplicates.

Some base documents then get seeded edits: word substitutions, insertions and deletions at a
given rate, paragraph reordering, HTML wrapping with navigation and footer boilerplate,
truncation and short excerpts. The corpus is the same for the same seed and size.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import random
import re
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

MIN_WORDS = 40
MAX_WORDS = 600
EDIT_RATES = (0.01, 0.03, 0.05, 0.10, 0.20)
MAN_PAGES = 500
TRANSLATED_MAN_PAGES = 40
_TRIGRAM_OVERLAP_LIMIT = 0.3
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SPACES = re.compile(r"[ \t]+")
_MAN_OVERSTRIKE = re.compile(r".\x08")


@dataclasses.dataclass(frozen=True)
class CorpusDoc:
    """One document of the corpus.

    Attributes:
        id: unique id (``b00012`` for base documents, ``e00012-word-5%`` style for edits).
        text: the document text (plain text, or HTML for the ``html`` edit).
        kind: ``base`` or the edit that produced it (``word-1%``, ``reorder``, ``html``,
            ``truncate``, ``excerpt``).
        parent: id of the base document an edit was made from (``None`` for base documents).
        source: where the base text came from.
    """

    id: str
    text: str
    kind: str
    parent: str | None
    source: str

    @property
    def words(self) -> int:
        """Number of whitespace-separated words."""
        return len(self.text.split())


# -- sources ------------------------------------------------------------------------------------

Loader = Callable[[Path], str]
STDLIB_SKIP = {
    "test",
    "tests",
    "idlelib",
    "site-packages",
    "dist-packages",
    "lib2to3",
    "turtledemo",
}


def read_text(path: Path) -> str:
    """A text file (license, ``copyright``), undecodable bytes replaced."""
    return path.read_text(encoding="utf-8", errors="replace")


def module_docstrings(path: Path) -> str:
    """Module, class and function docstrings of a Python module, one paragraph group each."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    docs = [ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds)]
    return "\n\n".join(d for d in docs if d)


def render_man(path: Path) -> str:
    """A manual page rendered as plain text, without hyphenation or justification."""
    env = {**os.environ, "MANWIDTH": "100", "LANG": "C.UTF-8"}
    command = ["man", "--no-hyphenation", "--no-justification", "-l", "-P", "cat", str(path)]
    try:
        done = subprocess.run(command, capture_output=True, env=env, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return _MAN_OVERSTRIKE.sub("", done.stdout.decode("utf-8", errors="replace"))


def source_files(rng: random.Random) -> list[tuple[Path, Loader]]:
    """Every source file with the function that reads its text, in a seeded order."""
    files: list[tuple[Path, Loader]] = []
    licenses = Path("/usr/share/common-licenses")
    files += [(p, read_text) for p in sorted(licenses.glob("*")) if p.is_file()]
    files += [(p, read_text) for p in sorted(Path("/usr/share/doc").glob("*/copyright"))]
    stdlib = Path(os.__file__).parent
    modules = (p for p in sorted(stdlib.rglob("*.py")) if not STDLIB_SKIP & set(p.parts))
    files += [(p, module_docstrings) for p in modules]
    man = Path("/usr/share/man")
    english = sorted(p for s in ("man1", "man5", "man7", "man8") for p in (man / s).glob("*.gz"))
    translated = sorted(p for lang in ("ru", "de", "zh_CN") for p in (man / lang).rglob("*.gz"))
    files += [(p, render_man) for p in _sample(rng, english, MAN_PAGES)]
    files += [(p, render_man) for p in _sample(rng, translated, TRANSLATED_MAN_PAGES)]
    rng.shuffle(files)
    return files


def _sample(rng: random.Random, items: list[Path], k: int) -> list[Path]:
    return sorted(rng.sample(items, min(k, len(items))))


# -- pieces -------------------------------------------------------------------------------------


def paragraphs(text: str) -> list[str]:
    """Paragraphs of ``text``: split at blank lines, dedented, lines joined by single spaces."""
    out = []
    for block in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n")):
        lines = [_SPACES.sub(" ", line).strip() for line in textwrap.dedent(block).splitlines()]
        flowed = " ".join(line for line in lines if line and set(line) != {"."})
        if len(flowed.split()) >= 3:
            out.append(flowed)
    return out


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def pieces(
    text: str, rng: random.Random, length: Callable[[str], int] = word_count
) -> Iterator[list[str]]:
    """Groups of consecutive paragraphs of 40-600 words (a target length drawn per group).

    Args:
        text: the source text.
        rng: draws the target length of each group.
        length: the length of a paragraph in words (text without spaces between its words
            needs its own measure).
    """
    group: list[str] = []
    size = 0
    target = _target_length(rng)
    for para in paragraphs(text):
        words = length(para)
        if words > MAX_WORDS:
            continue
        if size + words > MAX_WORDS:
            if size >= MIN_WORDS:
                yield group
            group, size, target = [], 0, _target_length(rng)
        group.append(para)
        size += words
        if size >= target:
            yield group
            group, size, target = [], 0, _target_length(rng)
    if size >= MIN_WORDS:
        yield group


def _target_length(rng: random.Random) -> int:
    """Document lengths spread over the whole 40-600 range, shorter ones more often."""
    return int(MIN_WORDS * (MAX_WORDS / MIN_WORDS) ** rng.random())


class Novelty:
    """Keeps base pieces whose word trigrams are mostly new to the corpus."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, ...]] = set()

    def accept(self, text: str) -> bool:
        words = [w.casefold() for w in re.findall(r"\w+", text)]
        grams = {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
        if not grams or len(grams & self.seen) > _TRIGRAM_OVERLAP_LIMIT * len(grams):
            return False
        self.seen |= grams
        return True


def base_documents(count: int, seed: int) -> list[CorpusDoc]:
    """``count`` distinct base documents (fewer if the machine has too little text).

    Source files are read in a seeded order until enough pieces are accepted, so a small corpus
    is quick to build.
    """
    rng = random.Random(seed)
    novelty = Novelty()
    docs: list[CorpusDoc] = []
    for path, load in source_files(rng):
        for group in pieces(load(path), rng):
            text = "\n\n".join(group)
            if novelty.accept(text):
                docs.append(CorpusDoc(f"b{len(docs):05d}", text, "base", None, str(path)))
                if len(docs) == count:
                    return docs
    return docs


# -- edits --------------------------------------------------------------------------------------


def word_edit(text: str, rate: float, rng: random.Random, vocabulary: list[str]) -> str:
    """Substitute, insert or delete (equally likely) a ``rate`` share of the words."""
    out = []
    for para in text.split("\n\n"):
        words: list[str] = []
        for word in para.split():
            if rng.random() >= rate:
                words.append(word)
                continue
            action = rng.randrange(3)
            if action == 0:
                words.append(rng.choice(vocabulary))
            elif action == 1:
                words.extend((word, rng.choice(vocabulary)))
        out.append(" ".join(words))
    return "\n\n".join(p for p in out if p)


def reorder(text: str, rng: random.Random) -> str:
    """The paragraphs shuffled (sentences, when there is a single paragraph)."""
    parts = text.split("\n\n")
    joiner = "\n\n"
    if len(parts) < 2:
        parts, joiner = re.split(r"(?<=[.!?])\s+", text), " "
    if len(parts) < 2:
        half = len(text.split()) // 2
        words = text.split()
        return " ".join(words[half:] + words[:half])
    shuffled = parts[:]
    while shuffled == parts:
        rng.shuffle(shuffled)
    return joiner.join(shuffled)


_SITES = (
    ("Docs Portal", ("Home", "Guides", "Reference", "Downloads", "Community", "Search")),
    ("Open Source Archive", ("Start", "Projects", "Licenses", "News", "About us", "Contact")),
    ("Package Index", ("Browse", "Packages", "Help", "Sponsors", "Log in", "Register")),
)


def html_wrap(text: str, title: str, rng: random.Random) -> str:
    """The text as an HTML page with a head, navigation, footer and a script."""
    site, links = _SITES[rng.randrange(len(_SITES))]
    nav = "".join(f'<li><a href="/{w.lower().replace(" ", "-")}">{w}</a></li>' for w in links)
    body = "\n".join(f"<p>{_escape(p)}</p>" for p in text.split("\n\n"))
    return (
        f"<!DOCTYPE html>\n<html><head><title>{_escape(title)} | {site}</title>"
        "<style>body{font-family:sans-serif}</style></head>\n<body>\n"
        f"<header><h1>{site}</h1><nav><ul>{nav}</ul></nav></header>\n"
        f"<main><article>\n{body}\n</article></main>\n"
        f"<footer><p>Copyright 2024 {site}. All rights reserved. Privacy policy. Terms of use."
        "</p></footer>\n<script>window.analytics = {track: function () {}};</script>\n"
        "</body></html>\n"
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, rng: random.Random) -> str:
    """The first 50-90 % of the words (paragraph breaks kept)."""
    total = len(text.split())
    keep = max(1, int(total * rng.uniform(0.5, 0.9)))
    out, used = [], 0
    for para in text.split("\n\n"):
        words = para.split()[: keep - used]
        if words:
            out.append(" ".join(words))
        used += len(words)
        if used >= keep:
            break
    return "\n\n".join(out)


def excerpt(text: str, rng: random.Random) -> str | None:
    """One or two consecutive paragraphs copied out of a long document (None if too short)."""
    parts = text.split("\n\n")
    total = len(text.split())
    if len(parts) < 3 or total < 150:
        return None
    for _ in range(8):
        count = rng.choice((1, 2))
        start = rng.randrange(len(parts) - count + 1)
        chosen = parts[start : start + count]
        words = sum(len(p.split()) for p in chosen)
        if 15 <= words <= total // 3:
            return "\n\n".join(chosen)
    return None


def _edit_functions(vocabulary: list[str]) -> list[tuple[str, Callable[..., str | None]]]:
    edits: list[tuple[str, Callable[..., str | None]]] = [
        (f"word-{rate:.0%}", _word_editor(rate, vocabulary)) for rate in EDIT_RATES
    ]
    edits += [
        ("reorder", lambda doc, rng: reorder(doc.text, rng)),
        ("html", lambda doc, rng: html_wrap(doc.text, doc.text.split()[0], rng)),
        ("truncate", lambda doc, rng: truncate(doc.text, rng)),
        ("excerpt", lambda doc, rng: excerpt(doc.text, rng)),
    ]
    return edits


def _word_editor(rate: float, vocabulary: list[str]) -> Callable[..., str | None]:
    return lambda doc, rng: word_edit(doc.text, rate, rng, vocabulary)


def build_corpus(size: int = 3000, seed: int = 7, edited_share: float = 0.5) -> list[CorpusDoc]:
    """Base documents and seeded edits of some of them, ``size`` documents in all (about).

    Args:
        size: total number of documents wanted.
        seed: the seed of every random choice (same seed and size, same corpus).
        edited_share: share of the corpus made of edited copies.
    """
    rng = random.Random(seed)
    n_base = max(2, round(size * (1 - edited_share)))
    bases = base_documents(n_base, seed)
    vocabulary = sorted({w for d in bases[:200] for w in d.text.split() if w.isalpha()})
    edits = _edit_functions(vocabulary or ["word"])
    long_bases = [d for d in bases if excerpt(d.text, random.Random(0)) is not None] or bases
    out = list(bases)
    serial = 0
    while len(out) < size and serial < 10 * size:
        name, edit = edits[serial % len(edits)]
        pool = long_bases if name == "excerpt" else bases
        parent = pool[rng.randrange(len(pool))]
        serial += 1
        text = edit(parent, rng)
        if text and text.strip():
            out.append(CorpusDoc(f"e{serial:05d}-{name}", text, name, parent.id, parent.source))
    return out
