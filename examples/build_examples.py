"""Build the sample corpus in examples/ from texts found on a Debian machine with Python 3.11.

Sources: the Python Language Reference topics shipped with the interpreter (``pydoc_data``), the
docstrings of standard-library modules, the licenses in ``/usr/share/common-licenses`` and the
Russian and Chinese translations of the ``man(1)`` manual page. On top of the originals it seeds
near-duplicates (reposts with a few words changed, HTML-wrapped copies, an excerpt, a reordered
copy, exact reposts, Russian and Chinese near copies), measures every planted pair with the
default fingerprint parameters, checks that no unplanned pair is similar, and writes README.md.

Run from the repository root: ``python examples/build_examples.py``. The random choices are
seeded, so the same sources give the same files.
"""

from __future__ import annotations

import gzip
import html
import importlib
import inspect
import itertools
import json
import random
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from dedup_store.core import Fingerprint, FingerprintParams, fingerprint

SEED = 20240611
OUT = Path(__file__).resolve().parent
MAX_CHARS = 4000
MIN_CHARS = 1200
MIN_SHINGLES = 150  # shorter texts would be dominated by the HTML template around them
MIN_POST_SHINGLES = 40
UNPLANNED_LIMIT = 0.2  # containment above which an unplanned pair would be a duplicate
LICENSES = Path("/usr/share/common-licenses")
MAN_PAGES = {"ru": "/usr/share/man/ru/man1/man.1.gz", "zh": "/usr/share/man/zh_CN/man1/man.1.gz"}
MAN_SECTIONS = {"ru": "ОПИСАНИЕ", "zh": "描述"}
ARTICLE_TOPICS = 34
PAGE_TOPICS = 14
POSTS = 36


@dataclass
class Corpus:
    """Files to write (path -> content), JSONL posts and the planted duplicate groups."""

    files: dict[str, str] = field(default_factory=dict)
    posts: list[dict[str, str]] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)

    def texts(self) -> dict[str, str]:
        """Document id -> content, as ``dedup-store ingest`` sees it."""
        docs = dict(self.files)
        docs.update({post["id"]: post["text"] for post in self.posts})
        return docs


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def clip(text: str, limit: int = MAX_CHARS) -> str:
    """The leading paragraphs of ``text`` that fit in ``limit`` characters (at least one)."""
    kept: list[str] = []
    for para in paragraphs(text):
        if kept and sum(len(p) + 2 for p in kept) + len(para) > limit:
            break
        kept.append(para)
    return "\n\n".join(kept) + "\n"


def title_of(text: str) -> str:
    return text.strip().splitlines()[0].strip()


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def change_words(text: str, rng: random.Random, count: int) -> str:
    """Replace ``count`` words with other words of the same text (any script)."""
    words = list(re.finditer(r"\w{4,}", text))
    chosen = sorted(rng.sample(range(len(words)), count))
    pieces, last = [], 0
    for i in chosen:
        match = words[i]
        pieces += [text[last : match.start()], rng.choice(words).group()]
        last = match.end()
    return "".join(pieces) + text[last:]


def change_chars(text: str, rng: random.Random, count: int) -> str:
    """Replace ``count`` CJK characters with other characters of the same text."""
    chars = list(text)
    cjk = [i for i, c in enumerate(chars) if "\u4e00" <= c <= "\u9fff"]
    for i in rng.sample(cjk, count):
        chars[i] = chars[rng.choice(cjk)]
    return "".join(chars)


def strip_roff(source: str) -> str:
    """Plain text of a man page in roff: macros and table layout dropped, font escapes removed."""
    out: list[str] = []
    for raw in source.splitlines():
        line = re.sub(r"^(\d+)@T\{$", r"\1.", raw)
        if line.startswith(('.\\"', "'\\\"")) or line in ("T{", "T}", "l lx.", "tab (@);"):
            continue
        if line.startswith("."):
            macro, _, rest = line.partition(" ")
            if macro in (".B", ".I", ".BR", ".IR", ".BI", ".RB", ".IB", ".SS") and rest:
                out.append(rest.replace('"', ""))
            elif macro in (".PP", ".P", ".LP", ".TP", ".IP", ".SH"):
                out.append("")
            continue
        out.append(line)
    text = "\n".join(out)
    text = re.sub(r"\\f[BIRPC]|\\f\(..|\\[|&^]|\\/", "", text)
    text = text.replace("\\-", "-").replace("\\(em", "—").replace("\\ ", " ")
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def man_description(lang: str) -> str:
    """The DESCRIPTION section of the translated man(1) page."""
    source = gzip.decompress(Path(MAN_PAGES[lang]).read_bytes()).decode("utf-8")
    section = source.split(f".SH {MAN_SECTIONS[lang]}", 1)[1].split("\n.SH ", 1)[0]
    return clip(strip_roff(section), 3000)


def topic_texts() -> dict[str, str]:
    from pydoc_data.topics import topics

    parts: dict[str, str] = {}
    for name, text in sorted(topics.items()):
        for number, part in enumerate(chunks(text), 1):
            if len(part) >= MIN_CHARS:
                parts[name if number == 1 else f"{name}-part-{number}"] = part
    return parts


def chunks(text: str, limit: int = MAX_CHARS) -> list[str]:
    """Consecutive runs of whole paragraphs of at most ``limit`` characters, at most three."""
    out: list[list[str]] = [[]]
    for para in paragraphs(text):
        if out[-1] and sum(len(p) + 2 for p in out[-1]) + len(para) > limit:
            out.append([])
        out[-1].append(para)
    return ["\n\n".join(c) + "\n" for c in out[:3]]


def module_docs() -> dict[str, str]:
    """Docstrings of standard-library modules, 400 to 3000 characters long."""
    docs: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(sys.stdlib_module_names):
            if name.startswith("_") or name in ("antigravity", "this", "idlelib", "turtledemo"):
                continue
            try:
                doc = inspect.getdoc(importlib.import_module(name)) or ""
            except Exception:
                continue
            if 400 <= len(doc) <= 3000 and doc not in docs.values():
                docs[name] = doc + "\n"
    return docs


def distinct(
    candidates: dict[str, str], taken: list[str], limit: int, min_shingles: int = MIN_SHINGLES
) -> dict[str, str]:
    """Up to ``limit`` long enough candidates sharing little text with each other and ``taken``."""
    params = FingerprintParams()
    prints = [fingerprint(t, params) for t in taken]
    chosen: dict[str, str] = {}
    for name, text in candidates.items():
        fp = fingerprint(text, params)
        long_enough = len(fp.shingles) >= min_shingles
        if long_enough and all(fp.containment(o) <= UNPLANNED_LIMIT / 2 for o in prints):
            chosen[name] = text
            prints.append(fp)
        if len(chosen) == limit:
            break
    return chosen


NAV = ["Home", "Articles", "Reference", "Archive", "About", "Contact"]


def wrap_html(title: str, body: str) -> str:
    """An HTML page of the fictional site, with its navigation, sidebar and footer."""
    nav = "".join(f'<li><a href="/{slug(n)}/">{n}</a></li>' for n in NAV)
    paras = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs(body)[1:])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)} | Python Notes</title>
<style>body {{ font-family: serif; }} nav li {{ display: inline; }}</style>
<script>window.analytics = {{ page: "{slug(title)}" }};</script>
</head>
<body>
<header><nav><ul>{nav}</ul></nav></header>
<main>
<article>
<h1>{html.escape(title)}</h1>
{paras}
</article>
</main>
<aside><h2>Newsletter</h2><p>Get new articles by e-mail every month.</p></aside>
<footer><p>© Python Notes contributors. Text under the PSF license.</p>
<p><a href="/privacy/">Privacy</a> · <a href="/feed.xml">RSS feed</a></p></footer>
</body>
</html>
"""


def post(rng: random.Random, number: int, title: str, text: str) -> dict[str, str]:
    day = rng.randrange(0, 365)
    month, mday = 1 + day // 31 % 12, 1 + day % 28
    return {
        "id": f"post-{number:03d}",
        "title": title,
        "url": f"https://notes.example.org/2024/{month:02d}/{slug(title)}",
        "published": f"2024-{month:02d}-{mday:02d}T{rng.randrange(24):02d}:00:00Z",
        "text": text,
    }


def build() -> Corpus:
    rng = random.Random(SEED)
    corpus = Corpus()
    files = corpus.files
    gpl = (LICENSES / "GPL-3").read_text()
    licenses = {n: clip((LICENSES / n).read_text()) for n in ("Apache-2.0", "MPL-2.0", "CC0-1.0")}
    ru, zh = man_description("ru"), man_description("zh")
    base = [gpl, ru, zh, *licenses.values()]
    topics = distinct(topic_texts(), base, ARTICLE_TOPICS + PAGE_TOPICS)
    names = list(topics)
    rng.shuffle(names)
    article_names, page_names = names[:ARTICLE_TOPICS], names[ARTICLE_TOPICS:]
    for name in article_names:
        files[f"articles/{slug(name)}.txt"] = topics[name]
    for name in page_names:
        files[f"pages/{slug(name)}.html"] = wrap_html(title_of(topics[name]), topics[name])
    for name, text in licenses.items():
        files[f"articles/license-{slug(name)}.txt"] = text
    files["articles/gpl-3.0.txt"] = gpl
    files["articles/man-ru.txt"] = ru
    files["articles/man-zh.txt"] = zh
    posts_src = distinct(module_docs(), base + list(topics.values()), POSTS, MIN_POST_SHINGLES)
    for number, (name, text) in enumerate(posts_src.items(), 1):
        corpus.posts.append(post(rng, number, f"The {name} module", text))
    seed_duplicates(corpus, rng, article_names, gpl, ru, zh)
    return corpus


def seed_duplicates(
    corpus: Corpus, rng: random.Random, names: list[str], gpl: str, ru: str, zh: str
) -> None:
    """Add the planted near-duplicates and record which documents form each group."""
    files, groups = corpus.files, corpus.groups
    a, b, c, d = (slug(n) for n in names[:4])
    text_a, text_b, text_c, text_d = (files[f"articles/{x}.txt"] for x in (a, b, c, d))

    files[f"articles/{a}-repost.txt"] = change_words(text_a, rng, 4)
    groups.append(
        ("repost with 4 words changed", [f"articles/{a}.txt", f"articles/{a}-repost.txt"])
    )

    files[f"pages/{b}.html"] = wrap_html(title_of(text_b), text_b)
    groups.append(("the same text in an HTML page", [f"articles/{b}.txt", f"pages/{b}.html"]))

    files[f"articles/{c}-repost.txt"] = change_words(text_c, rng, 4)
    files[f"pages/{c}.html"] = wrap_html(title_of(text_c), text_c)
    exact = post(rng, 901, title_of(text_c), text_c)
    corpus.posts.append(exact)
    groups.append(
        (
            "one text four times: original, exact copy in the feed, 4 words changed, HTML page",
            [f"articles/{c}.txt", exact["id"], f"articles/{c}-repost.txt", f"pages/{c}.html"],
        )
    )

    paras = paragraphs(text_d)
    shuffled = paras[:]
    while shuffled == paras:
        rng.shuffle(shuffled)
    files[f"articles/{d}-reordered.txt"] = "\n\n".join(shuffled) + "\n"
    groups.append(("paragraphs reordered", [f"articles/{d}.txt", f"articles/{d}-reordered.txt"]))

    start, end = gpl.index("  4. Conveying Verbatim Copies."), gpl.index("  8. Termination.")
    files["articles/gpl-3.0-excerpt.txt"] = gpl[start:end]
    groups.append(
        (
            "an excerpt (sections 4 to 7) of a long article",
            ["articles/gpl-3.0.txt", "articles/gpl-3.0-excerpt.txt"],
        )
    )

    files["articles/man-ru-repost.txt"] = change_words(ru, rng, 4)
    groups.append(
        ("Russian, 4 words changed", ["articles/man-ru.txt", "articles/man-ru-repost.txt"])
    )

    zh_copy = post(rng, 902, "man 手册页", change_chars(zh, rng, 4))
    corpus.posts.append(zh_copy)
    groups.append(("Chinese, 4 characters changed", ["articles/man-zh.txt", zh_copy["id"]]))

    first, second = corpus.posts[0], corpus.posts[1]
    repost = post(rng, 903, first["title"] + " (repost)", first["text"])
    corpus.posts.append(repost)
    groups.append(("exact repost in the feed", [first["id"], repost["id"]]))
    edited = change_words(second["text"], rng, 2) + "\nUpdated: fixed a typo.\n"
    update = post(rng, 904, second["title"] + " (updated)", edited)
    corpus.posts.append(update)
    groups.append(
        ("feed post updated: 2 words changed, a line added", [second["id"], update["id"]])
    )


def measure(corpus: Corpus) -> tuple[list[list[str]], list[str]]:
    """Table rows for the planted pairs, and the problems: an unplanned similar pair, or a planted
    pair that no default criterion (Jaccard, containment, SimHash distance) would call similar."""
    params = FingerprintParams()
    docs = corpus.texts()
    prints = {doc_id: fingerprint(text, params) for doc_id, text in docs.items()}
    planted: set[frozenset[str]] = set()
    rows: list[list[str]] = []
    problems: list[str] = []
    for label, members in corpus.groups:
        for x, y in itertools.combinations(members, 2):
            planted.add(frozenset((x, y)))
            fx, fy = prints[x], prints[y]
            if not similar(fx, fy, params):
                problems.append(f"{x} ~ {y}: planted but not similar by the default params")
            exact = "yes" if fx.exact_hash == fy.exact_hash else "no"
            rows.append(
                [
                    label,
                    f"`{x}`",
                    f"`{y}`",
                    f"{fx.jaccard(fy):.2f}",
                    f"{fx.containment(fy):.2f}",
                    str(fx.hamming(fy)),
                    exact,
                ]
            )
            label = '"'
    problems += [
        f"{x} ~ {y}: unplanned, containment {prints[x].containment(prints[y]):.2f}"
        for x, y in itertools.combinations(sorted(prints), 2)
        if frozenset((x, y)) not in planted and prints[x].containment(prints[y]) > UNPLANNED_LIMIT
    ]
    return rows, problems


def similar(a: Fingerprint, b: Fingerprint, params: FingerprintParams) -> bool:
    return (
        a.jaccard(b) >= params.threshold
        or a.containment(b) >= params.containment
        or a.hamming(b) <= params.simhash_k
    )


def write(corpus: Corpus) -> None:
    for sub in ("articles", "pages"):
        shutil.rmtree(OUT / sub, ignore_errors=True)
        (OUT / sub).mkdir()
    for path, text in corpus.files.items():
        (OUT / path).write_text(text, encoding="utf-8")
    with (OUT / "posts.jsonl").open("w", encoding="utf-8") as out:
        for item in corpus.posts:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")


def main() -> None:
    corpus = build()
    rows, problems = measure(corpus)
    if problems:
        sys.exit("the corpus does not have the intended duplicates:\n" + "\n".join(problems))
    write(corpus)
    (OUT / "README.md").write_text(readme(corpus, rows), encoding="utf-8")
    print(f"{len(corpus.texts())} documents, {len(rows)} planted pairs, no unplanned similar pair")


def readme(corpus: Corpus, rows: list[list[str]]) -> str:
    docs, params = corpus.texts(), FingerprintParams()
    size = sum(len(t.encode()) for t in docs.values())
    counts = {
        "articles": sum(p.startswith("articles/") for p in corpus.files),
        "pages": sum(p.startswith("pages/") for p in corpus.files),
    }
    header = (
        "| group | document | duplicate of | Jaccard | containment | SimHash distance | same text |"
    )
    table = "\n".join(
        [header, "|---|---|---|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows)]
    )
    in_groups = len({m for _, members in corpus.groups for m in members})
    return README.format(
        total=len(docs),
        kb=size // 1024,
        articles=counts["articles"],
        pages=counts["pages"],
        posts=len(corpus.posts),
        groups=len(corpus.groups),
        in_groups=in_groups,
        singles=len(docs) - in_groups,
        table=table,
        python=sys.version.split()[0],
        limit=UNPLANNED_LIMIT,
        threshold=params.threshold,
        containment=params.containment,
        simhash_k=params.simhash_k,
    )


README = """# Sample corpus

{total} documents ({kb} KB) to try dedup_store on, in the three shapes it reads:

- `articles/*.txt`: {articles} plain-text articles: sections of the Python Language Reference,
  software licenses (Apache 2.0, MPL 2.0, CC0, the whole GPL 3), and the `man(1)` manual page
  in Russian and Chinese. A text file's id is its path below the directory given to `ingest`,
  e.g. `articles/gpl-3.0.txt`.
- `pages/*.html`: {pages} HTML pages of a fictional site: every page carries the same navigation,
  sidebar, footer, style and script around its article.
- `posts.jsonl`: {posts} feed posts, one JSON object per line with `id`, `title`, `url`,
  `published` and `text` (docstrings of Python standard-library modules).

## Which documents are duplicates

{groups} groups of planted duplicates hold {in_groups} documents; the other {singles} documents
are distinct (no other pair shares more than {limit:.0%} of the shingles of the smaller document).
The figures below were measured with the default fingerprint parameters: exact Jaccard of the
shingle sets, containment (share of the smaller document inside the larger one), Hamming
distance of the 64-bit SimHashes, and whether the canonical texts are identical.

{table}

Every planted pair passes at least one of the default criteria: Jaccard at least
{threshold}, containment at least {containment}, or SimHash distance at most {simhash_k}. The HTML
pages are compared after their markup is removed, so the shared navigation and footer are the
only difference from the plain-text article. The excerpt has a low Jaccard similarity
(it is a small part of a long text) but a containment of 1: it is found by the excerpt index,
not by the MinHash bands.

## How it was built

`python examples/build_examples.py` (run from the repository root, Python {python}, on Debian)
builds everything here, this file included, from texts found on the machine: `pydoc_data`
topics and module docstrings of the Python standard library, `/usr/share/common-licenses`, and
`/usr/share/man/{{ru,zh_CN}}/man1/man.1.gz`. The duplicates are seeded (fixed random seed): words
replaced by other words of the same text, paragraphs shuffled, a text wrapped in the site's HTML
template. The script refuses to write a corpus in which an unplanned pair is similar.
"""


if __name__ == "__main__":
    main()
