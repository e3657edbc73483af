"""Corpora of real text found on a Debian machine, for the real-text benchmark.

Each corpus is a list of :class:`~benchmarks.quality_corpus.CorpusDoc`, in a fixed order:

- ``copyright``: every ``/usr/share/doc/*/copyright`` file, one document each, id = package.
  Templated and duplicate-heavy: the same licence texts and notices appear in hundreds of them.
- ``licenses``: every file of ``/usr/share/common-licenses`` (some are links to others).
- ``man``: manual pages of sections 1, 5, 7 and 8 rendered as plain text (a seeded sample;
  rendered pages are cached, see :data:`CACHE`), id = ``man1/ls.1``.
- ``pysrc``: Python modules of several released versions of a few pure-Python packages (pip,
  setuptools, fsspec, rich, pytest, marshmallow, mistune, more-itertools; :data:`PYSRC_WHEELS`),
  one document per ``.py`` file of at least :data:`PYSRC_MIN_BYTES` bytes (about 21 KB on
  average), id = ``pip-23.2.1/pip/_internal/req/req_install.py``, in the order of that table.
  The same module in successive versions is where its near-duplicates come from; modules a
  release left unchanged are exact copies, kept as the other corpora keep theirs. The wheels
  are kept in :data:`CACHE` (``pysrc/``); a missing one is fetched with ``pip download`` from
  the configured package index, looking first in the wheel directories of this machine
  (:data:`WHEEL_DIRS`: the pip and setuptools wheels bundled with each installed Python).
- ``docstrings``: docstrings of the Python standard library (modules, classes, functions) of at
  least 20 words, id = ``module:qualified.name``.
- ``seeded``: pieces of those texts, of the translated (Russian, Chinese) manual pages and of
  any extra text files, with seeded edits of them (those of
  :mod:`benchmarks.quality_corpus`, and reformatting, spacing and punctuation changes).
"""

from __future__ import annotations

import ast
import os
import random
import re
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import quality_corpus as qc
from benchmarks.quality_corpus import CorpusDoc
from dedup_store.core.canonical import has_cjk

#: Rendered manual pages are kept here (``DEDUP_STORE_BENCH_CACHE`` overrides it).
CACHE = Path(os.environ.get("DEDUP_STORE_BENCH_CACHE", "~/.cache/dedup_store_bench")).expanduser()
MAN_ROOT = Path("/usr/share/man")
MAN_SECTIONS = ("man1", "man5", "man7", "man8")
TRANSLATED_MAN = ("ru", "zh_CN", "zh_TW")
MAN_PAGES = 2500
SEEDED_DOCS = 6000
DOCSTRING_MIN_WORDS = 20
SEEDED_MAN_PAGES = 400
CORPORA = ("copyright", "licenses", "man", "pysrc", "docstrings", "seeded")
#: The ``pysrc`` corpus: released versions of a few pure-Python packages, oldest first.
PYSRC_WHEELS: dict[str, tuple[str, ...]] = {
    "pip": ("18.1", "19.2.3", "22.0.4", "23.0.1", "23.2.1", "24.2", "26.2.1"),
    "setuptools": (
        "40.6.2",
        "41.2.0",
        "47.1.0",
        "56.0.0",
        "58.1.0",
        "65.5.0",
        "66.1.1",
        "80.9.0",
        "84.0.0",
    ),
    "fsspec": ("2026.6.0", "2026.7.0", "2026.9.0"),
    "rich": ("13.9.4", "15.0.0"),
    "pytest": ("8.4.2", "9.1.1"),
    "marshmallow": ("3.26.2", "4.3.1"),
    "mistune": ("2.0.5", "3.3.4"),
    "more-itertools": ("10.8.0", "11.1.0"),
}
#: Smaller modules (``__init__.py``, short helpers) are left out of ``pysrc``.
PYSRC_MIN_BYTES = 4096
#: Where wheels already on this machine are looked for (glob patterns).
WHEEL_DIRS = (
    "/usr/share/python-wheels",
    f"{Path(sys.base_prefix).parent}/*/lib/python*/ensurepip/_bundled",
    "/usr/lib/python3*/ensurepip/_bundled",
)
_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LETTER = re.compile(r"[^\W\d_]")


# -- the plain corpora ---------------------------------------------------------------------


def copyright_docs() -> list[CorpusDoc]:
    """Every package's ``copyright`` file, id = the package name."""
    paths = sorted(Path("/usr/share/doc").glob("*/copyright"))
    return [_doc(p.parent.name, qc.read_text(p), p) for p in paths if p.is_file()]


def license_docs() -> list[CorpusDoc]:
    """Every text of ``/usr/share/common-licenses``, id = the file name."""
    paths = sorted(Path("/usr/share/common-licenses").glob("*"))
    return [_doc(p.name, qc.read_text(p), p) for p in paths if p.is_file()]


def man_docs(limit: int, seed: int) -> list[CorpusDoc]:
    """Up to ``limit`` English manual pages (a seeded sample), rendered to text."""
    pages = man_pages(MAN_SECTIONS, limit, seed)
    texts = rendered(pages)
    return [_doc(_man_id(p), t, p) for p, t in zip(pages, texts, strict=True) if t.strip()]


def man_pages(sections: Sequence[str], limit: int, seed: int) -> list[Path]:
    """A seeded sample of ``limit`` page files under ``sections`` of :data:`MAN_ROOT`, sorted."""
    files = sorted(p for s in sections for p in (MAN_ROOT / s).rglob("*.gz"))
    return sorted(random.Random(seed).sample(files, min(limit, len(files))))


def rendered(pages: Sequence[Path]) -> list[str]:
    """The pages rendered as text (two at a time per processor), through :data:`CACHE`."""
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1)) as pool:
        return list(pool.map(_rendered_page, pages))


def _rendered_page(page: Path) -> str:
    cached = CACHE / "man" / (_man_id(page) + ".txt")
    if cached.exists():
        return cached.read_text(encoding="utf-8")
    text = qc.render_man(page)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(text, encoding="utf-8")
    return text


def _man_id(page: Path) -> str:
    return str(page.relative_to(MAN_ROOT)).removesuffix(".gz")


def pysrc_docs(
    wheels: Mapping[str, Sequence[str]] = PYSRC_WHEELS,
    cache: Path | None = None,
    min_bytes: int = PYSRC_MIN_BYTES,
) -> list[CorpusDoc]:
    """The ``.py`` files of at least ``min_bytes`` of every version of ``wheels``, wheel after
    wheel, id = ``name-version/path``; wheels missing from ``cache`` are downloaded into it."""
    folder = cache or CACHE / "pysrc"
    docs: list[CorpusDoc] = []
    for name, versions in wheels.items():
        for version in versions:
            docs += wheel_docs(pysrc_wheel(name, version, folder), min_bytes)
    return docs


def pysrc_wheel(name: str, version: str, cache: Path) -> Path:
    """The wheel of ``name==version`` in ``cache``, downloaded into it if it is not there."""
    pattern = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*.whl"
    found = sorted(cache.glob(pattern))
    if not found:
        _download_wheel(f"{name}=={version}", cache)
        found = sorted(cache.glob(pattern))
    if not found:
        raise FileNotFoundError(f"pip download {name}=={version} left no {pattern} in {cache}")
    return found[0]


def _download_wheel(requirement: str, cache: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    links = [f"--find-links={d}" for p in WHEEL_DIRS for d in sorted(Path("/").glob(p[1:]))]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--only-binary=:all:", f"--dest={cache}", *links, requirement]
    print(f"pysrc: pip download {requirement}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def wheel_docs(wheel: Path, min_bytes: int) -> list[CorpusDoc]:
    """The ``.py`` files of at least ``min_bytes`` in ``wheel``, in path order,
    id = ``name-version/path``."""
    prefix = "-".join(wheel.name.split("-")[:2])
    with zipfile.ZipFile(wheel) as archive:
        members = sorted(
            info.filename
            for info in archive.infolist()
            if info.filename.endswith(".py") and info.file_size >= min_bytes
        )
        return [
            _doc(f"{prefix}/{m}", archive.read(m).decode("utf-8", "replace"), wheel / m)
            for m in members
        ]


def docstring_docs(limit: int | None = None) -> list[CorpusDoc]:
    """Docstrings of at least 20 words of the standard library, id = ``module:qualname``."""
    stdlib = Path(os.__file__).parent
    docs: list[CorpusDoc] = []
    seen: set[str] = set()
    for path in sorted(stdlib.rglob("*.py")):
        if qc.STDLIB_SKIP & set(path.relative_to(stdlib).parts):
            continue
        module = ".".join(path.relative_to(stdlib).with_suffix("").parts)
        for name, text in docstrings(path):
            if len(text.split()) >= DOCSTRING_MIN_WORDS:
                doc_id = _unique(f"{module}:{name}", seen)
                docs.append(_doc(doc_id, text, path))
                if len(docs) == limit:
                    return docs
    return docs


def docstrings(path: Path) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` of a module and every class and function in it."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    yield from _walk_docstrings(tree, "")


_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _walk_docstrings(node: ast.AST, qualname: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        text = ast.get_docstring(node)
        if text:
            yield qualname or "<module>", text
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _DEFINITIONS):
            yield from _walk_docstrings(child, f"{qualname}.{child.name}".lstrip("."))
        else:
            yield from _walk_docstrings(child, qualname)


def _unique(doc_id: str, seen: set[str]) -> str:
    candidate, serial = doc_id, 1
    while candidate in seen:
        serial += 1
        candidate = f"{doc_id}#{serial}"
    seen.add(candidate)
    return candidate


def _doc(doc_id: str, text: str, path: Path) -> CorpusDoc:
    return CorpusDoc(doc_id, text.replace("\x00", ""), "base", None, str(path))


# -- the seeded corpus ---------------------------------------------------------------------


def language(text: str) -> str:
    """``zh`` for text with CJK characters, ``ru`` when most letters are Cyrillic, else ``en``."""
    if _CJK_CHAR.search(text):
        return "zh"
    letters = len(_LETTER.findall(text))
    return "ru" if letters and len(_CYRILLIC.findall(text)) > letters / 2 else "en"


def text_length(text: str) -> int:
    """Length in words, counting two CJK characters as one word."""
    cjk = len(_CJK_CHAR.findall(text))
    return len(_CJK_CHAR.sub(" ", text).split()) + cjk // 2


def seeded_sources(seed: int, extra: Sequence[Path]) -> tuple[list[CorpusDoc], list[CorpusDoc]]:
    """Source texts of the seeded corpus: ``(English, other languages)``, each shuffled."""
    rng = random.Random(seed)
    english = license_docs() + copyright_docs() + docstring_docs()
    english += man_docs(SEEDED_MAN_PAGES, seed)
    pages = man_pages(TRANSLATED_MAN, MAN_PAGES, seed)
    other = [_doc(_man_id(p), t, p) for p, t in zip(pages, rendered(pages), strict=True)]
    other += [_doc(p.name, qc.read_text(p), p) for p in extra]
    other = [d for d in other if language(d.text) != "en"]
    rng.shuffle(english)
    rng.shuffle(other)
    return english, other


def base_pieces(
    sources: Sequence[CorpusDoc], count: int, seed: int, novelty: qc.Novelty
) -> list[CorpusDoc]:
    """Up to ``count`` pieces of 40-600 words of ``sources``, each mostly new to ``novelty``."""
    rng = random.Random(seed)
    out: list[CorpusDoc] = []
    for source in sources:
        for group in qc.pieces(source.text, rng, text_length):
            text = "\n\n".join(group)
            if novelty.accept(text):
                out.append(CorpusDoc("", text, "base", None, source.id))
                if len(out) == count:
                    return out
    return out


def seeded_docs(size: int, seed: int, extra: Sequence[Path] = ()) -> list[CorpusDoc]:
    """About ``size`` documents: half base pieces (a quarter of them Russian or Chinese when
    there is enough such text), half seeded edits of them."""
    english, other = seeded_sources(seed, extra)
    novelty = qc.Novelty()
    n_base = max(2, size // 2)
    bases = base_pieces(other, n_base // 4, seed, novelty)
    bases += base_pieces(english, n_base - len(bases), seed, novelty)
    bases = [
        CorpusDoc(f"b{i:05d}-{language(d.text)}", d.text, "base", None, d.source)
        for i, d in enumerate(bases)
    ]
    return bases + seeded_edits(bases, size - len(bases), seed)


def seeded_edits(bases: Sequence[CorpusDoc], count: int, seed: int) -> list[CorpusDoc]:
    """``count`` edited copies of random ``bases``, the kinds of edit in turn."""
    rng = random.Random(seed + 1)
    edits = edit_functions(bases)
    out: list[CorpusDoc] = []
    serial = 0
    while len(out) < count and serial < 10 * count:
        name, edit = edits[serial % len(edits)]
        parent = bases[rng.randrange(len(bases))]
        serial += 1
        text = edit(parent, rng)
        if text and text.strip() and text != parent.text:
            doc_id = f"e{serial:05d}-{name}-{parent.id}"
            out.append(CorpusDoc(doc_id, text, name, parent.id, parent.source))
    return out


Edit = Callable[[CorpusDoc, random.Random], str | None]


def edit_functions(bases: Sequence[CorpusDoc]) -> list[tuple[str, Edit]]:
    """The edits of :mod:`benchmarks.quality_corpus` (word edits made per character in CJK
    text) and reformatting, spacing and punctuation changes."""
    words = sorted({w for d in bases[:300] for w in d.text.split() if w.isalpha()})
    chars = sorted({c for d in bases for c in _CJK_CHAR.findall(d.text)}) or ["字"]
    edits: list[tuple[str, Edit]] = [
        (f"word-{rate:.0%}", _word_editor(rate, words or ["word"], chars)) for rate in qc.EDIT_RATES
    ]
    edits += [
        ("reorder", lambda doc, rng: qc.reorder(doc.text, rng)),
        ("html", lambda doc, rng: qc.html_wrap(doc.text, doc.text.split()[0], rng)),
        ("truncate", lambda doc, rng: truncate(doc.text, rng)),
        ("excerpt", lambda doc, rng: qc.excerpt(doc.text, rng)),
        ("reformat", lambda doc, rng: reformat(doc.text, rng)),
        ("spacing", lambda doc, rng: respace(doc.text, rng)),
        ("punctuation", lambda doc, rng: punctuation(doc.text, rng)),
    ]
    return edits


def _word_editor(rate: float, words: list[str], chars: list[str]) -> Edit:
    def edit(doc: CorpusDoc, rng: random.Random) -> str:
        if has_cjk(doc.text):
            return cjk_edit(doc.text, rate / 2, rng, chars)
        return qc.word_edit(doc.text, rate, rng, words)

    return edit


def cjk_edit(text: str, rate: float, rng: random.Random, chars: list[str]) -> str:
    """Substitute, insert or delete (equally likely) a ``rate`` share of the CJK characters."""
    out: list[str] = []
    for char in text:
        if not _CJK_CHAR.match(char) or rng.random() >= rate:
            out.append(char)
            continue
        action = rng.randrange(3)
        if action == 0:
            out.append(rng.choice(chars))
        elif action == 1:
            out += [char, rng.choice(chars)]
    return "".join(out)


def truncate(text: str, rng: random.Random) -> str:
    """The first 50-90 % of the text: of its words, or of its characters if it has CJK."""
    if not has_cjk(text):
        return qc.truncate(text, rng)
    return text[: max(1, int(len(text) * rng.uniform(0.5, 0.9)))]


def reformat(text: str, rng: random.Random) -> str:
    """Lines re-wrapped at another width and indented, with CRLF line ends.

    Long CJK lines are broken every ``width`` characters, as a fixed-width layout does.
    """
    width = rng.randrange(30, 100)
    indent = " " * rng.choice((0, 2, 4, 8))
    paragraphs = [
        textwrap.fill(p, width, initial_indent=indent, subsequent_indent=indent)
        for p in text.split("\n\n")
    ]
    return "\r\n\r\n".join(p.replace("\n", "\r\n") for p in paragraphs)


_SPACES = ("\u00a0", "\u2009", "\u202f", "  ", "\t")


def respace(text: str, rng: random.Random) -> str:
    """Spaces between CJK characters; in other text, no-break, thin and doubled spaces."""
    if has_cjk(text):
        return _CJK_CHAR.sub(lambda m: m.group(0) + " ", text).replace("  ", " ")
    return re.sub(r" ", lambda _: rng.choice(_SPACES) if rng.random() < 0.3 else " ", text)


_FULLWIDTH, _ASCII = "，。：；！？（）", ",.:;!?()"
_SWAP_PUNCTUATION = str.maketrans(_FULLWIDTH + _ASCII, _ASCII + _FULLWIDTH)
_TYPOGRAPHIC = (("--", "\u2014"), ("-", "\u2010"), ("'", "\u2019"), ('"', "\u201c"))


def punctuation(text: str, rng: random.Random) -> str:
    """Fullwidth and ASCII punctuation swapped in CJK text; dashes and quotes made typographic
    (em dash, hyphen U+2010, curly quotes) in other text, each kind with probability 1/2."""
    if has_cjk(text):
        return text.translate(_SWAP_PUNCTUATION)
    for plain, fancy in _TYPOGRAPHIC:
        if rng.random() < 0.5:
            text = text.replace(plain, fancy)
    return text


# -- by name -------------------------------------------------------------------------------


def load(name: str, limit: int | None, seed: int, extra: Sequence[Path] = ()) -> list[CorpusDoc]:
    """The corpus ``name`` (one of :data:`CORPORA`), at most ``limit`` documents."""
    if name == "copyright":
        docs = copyright_docs()
    elif name == "licenses":
        docs = license_docs()
    elif name == "man":
        docs = man_docs(limit or MAN_PAGES, seed)
    elif name == "pysrc":
        docs = pysrc_docs()
    elif name == "docstrings":
        docs = docstring_docs(limit)
    elif name == "seeded":
        docs = seeded_docs(limit or SEEDED_DOCS, seed, extra)
    else:
        raise ValueError(f"unknown corpus {name!r}; expected one of {', '.join(CORPORA)}")
    return docs[:limit] if limit else docs
