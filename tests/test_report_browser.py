"""The review report opened in a real browser (Debian's chromium, headless, driven by
playwright): a store of a few hundred Debian copyright files, some near-duplicates of each
other, and an edited copy of bash's planted in it.

The test finds every cluster's section, the planted edit's words highlighted, the method and
similarity filters, the search by id and the links to clusters and pairs working, and takes a
screenshot. With ``DEDUP_STORE_REPORT_SCREENSHOT=PATH`` it also saves the screenshot of the docs
there (``docs/images/report.png``, see docs/reviewing.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote as quote_url

import pytest
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document
from dedup_store.db.schema.names import quote
from tests.report_html import CHROMIUM, CHROMIUM_ARGS, read_report

pytestmark = pytest.mark.db

COPYRIGHT_FILES = 300
PLANTED = "bash-planted"
#: bash's copyright file in the planted copy: one word replaced by two.
EDIT = ("prepackaged version", "quokka zanzibar version")
#: Two exact copies of a licence that a reviewer judged not duplicates.
JUDGED = ("mpl-product-a", "mpl-product-b")


@dataclasses.dataclass(frozen=True)
class Written:
    """The report of the store, and what the store holds."""

    path: Path
    clusters: dict[int, set[str]]
    pairs: dict[tuple[str, str], tuple[str, float]]

    @property
    def url(self) -> str:
        return self.path.as_uri()


def corpus() -> list[Document]:
    """The first copyright files by package, bash's, and the edited copy of bash's."""
    found = {d.id: d.text for d in copyright_docs()}
    chosen = dict(list(found.items())[:COPYRIGHT_FILES])
    chosen["bash"] = found["bash"]
    assert EDIT[0] in chosen["bash"]
    chosen[PLANTED] = chosen["bash"].replace(*EDIT, 1)
    licence = Path("/usr/share/common-licenses/MPL-2.0").read_text(encoding="utf-8")
    chosen.update(dict.fromkeys(JUDGED, licence))
    return [Document(k, v) for k, v in chosen.items()]


@pytest.fixture(scope="module")
def written(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with DedupStore(engine, schema=schema, keep_text=True) as store:
            assert store.ingest(corpus()).errors == 0
            store.review(*JUDGED, "not_duplicate", note="two products", by="ann")
            path = tmp_path_factory.mktemp("report") / "report.html"
            store.report(path)
            clusters = {c.cluster_id: set(c.members) for c in store.clusters()}
            pairs = {(p.a, p.b): (p.method.value, p.jaccard) for p in store.pairs()}
        yield Written(path, clusters, pairs)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A browser page that fails the test on a script error or a request beyond the file."""
    errors: list[str] = []
    requests: list[str] = []
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    yield tab
    tab.close()
    assert errors == [], f"the report's script failed: {errors}"
    assert requests == [], f"the report asked for more than its file: {requests}"


def shown_pairs(page: Any) -> list[tuple[str, float | None]]:
    """``(method, Jaccard)`` of the pairs on the page (hidden ones left out)."""
    rows = page.eval_on_selector_all(
        "details.pair", "ns => ns.map(n => [n.dataset.method, n.dataset.jaccard])"
    )
    return [(m, float(j) if j else None) for m, j in rows]


def quote_id(value: str) -> str:
    return quote_url(value, safe="-_.!~*'()")


def pair_id(a: str, b: str) -> str:
    """The element id of a pair (JavaScript's encodeURIComponent of each id)."""
    return f"pair-{quote_id(a)}--{quote_id(b)}"


def cluster_ids_on_every_page(page: Any) -> list[int]:
    found: list[int] = []
    while True:
        found += page.eval_on_selector_all(
            "article.cluster", "ns => ns.map(n => +n.dataset.cluster)"
        )
        after = page.locator("nav.pager").first.locator("button", has_text="next")
        if after.count() == 0 or after.is_disabled():
            return found
        after.click()


def test_every_cluster_has_its_section(page: Any, written: Written) -> None:
    page.goto(written.url)
    assert len(written.clusters) > 50  # more than one page
    assert page.locator("article.cluster").count() == 50
    assert f"{len(written.clusters)} clusters" in page.locator("#status").inner_text()
    assert sorted(cluster_ids_on_every_page(page)) == sorted(written.clusters)
    first = read_report(written.path).clusters[0]
    assert len(first["members"]) == max(len(m) for m in written.clusters.values())


def test_a_pair_shows_the_changed_words_highlighted(page: Any, written: Written) -> None:
    assert written.pairs[("bash", PLANTED)][0] == "minhash"
    page.goto(f"{written.url}#pair-bash--{PLANTED}")
    pair = page.locator(f"details#pair-bash--{PLANTED}")
    assert pair.get_attribute("open") is not None
    deleted = " ".join(pair.locator(".cell.a del").all_inner_texts()).split()
    inserted = " ".join(pair.locator(".cell.b ins").all_inner_texts()).split()
    assert deleted == ["prepackaged"]
    assert inserted == ["quokka", "zanzibar"]
    assert pair.locator(".cell.b ins").first.is_visible()
    folds = pair.locator("button.fold")
    assert folds.count() >= 1
    hidden_words = int(folds.first.inner_text().split()[1].replace(",", ""))
    folds.first.click()
    assert pair.locator(".cell.a.unfolded").count() == 1
    unfolded = pair.locator(".cell.a.unfolded").inner_text()
    assert len(re.findall(r"[^\W_]+", unfolded)) == hidden_words
    assert unfolded[-1].isspace()  # the fold ends where a space does


def test_the_method_filter_hides_pairs_of_other_methods(page: Any, written: Written) -> None:
    page.goto(written.url)
    methods = {m for m, _ in written.pairs.values()}
    assert {"exact", "minhash"} <= methods
    for method in methods - {"minhash"}:
        page.uncheck(f"#methods input[value={method}]")
    shown = shown_pairs(page)
    assert shown and {m for m, _ in shown} == {"minhash"}
    assert len(shown) == sum(m == "minhash" for m, _ in written.pairs.values())  # one page
    assert page.locator(f"details#pair-bash--{PLANTED}").count() == 1
    page.check("#methods input[value=exact]")
    page.uncheck("#methods input[value=minhash]")
    assert {m for m, _ in shown_pairs(page)} == {"exact"}
    assert page.locator(f"details#pair-bash--{PLANTED}").count() == 0


def test_the_similarity_filter_keeps_the_pairs_in_its_range(page: Any, written: Written) -> None:
    page.goto(written.url)
    page.fill("#sim-max", "0.5")
    low = shown_pairs(page)
    assert low and all(j is not None and j <= 0.5 for _, j in low)
    assert not {m for m, _ in low} & {"exact", "minhash"}  # these need 0.8 or more
    page.fill("#sim-max", "1")
    page.fill("#sim-min", "0.995")
    high = shown_pairs(page)
    assert high and all(j is not None and j >= 0.995 for _, j in high)
    assert not any(m == "containment" for m, _ in high)


def test_the_search_finds_a_documents_cluster(page: Any, written: Written) -> None:
    page.goto(written.url)
    page.fill("#search", PLANTED)
    page.wait_for_function("document.querySelectorAll('article.item').length === 1")
    cluster = page.locator("article.cluster")
    bash = next(c for c, members in written.clusters.items() if PLANTED in members)
    assert cluster.get_attribute("data-cluster") == str(bash)
    assert page.locator("tr.found").inner_text().split()[0] == PLANTED
    page.click("#reset")
    assert page.locator("article.cluster").count() == 50


def test_links_open_a_cluster_and_a_pair(page: Any, written: Written) -> None:
    page.goto(written.url)
    page.uncheck("#methods input[value=minhash]")  # hides the pair the link leads to
    page.evaluate(f"location.hash = 'pair-bash--{PLANTED}'")
    pair = page.locator(f"details#pair-bash--{PLANTED}")
    pair.wait_for()
    assert pair.get_attribute("open") is not None
    assert pair.evaluate("n => n.getBoundingClientRect().top") < 900
    assert page.is_checked("#methods input[value=minhash]")  # the filters were reset
    last = max(written.clusters, key=lambda c: (-len(written.clusters[c]), c))
    page.goto(f"{written.url}#cluster-{last}")
    card = page.locator(f"article#cluster-{last}")
    assert card.evaluate("n => n.getBoundingClientRect().top") < 900
    assert card.locator("h2 a").get_attribute("href") == f"#cluster-{last}"


def test_a_screenshot_of_a_pair(page: Any, written: Written, tmp_path: Path) -> None:
    page.goto(f"{written.url}#pair-bash--{PLANTED}")
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000
    docs = os.environ.get("DEDUP_STORE_REPORT_SCREENSHOT")
    if docs:
        docs_screenshot(page, written, Path(docs))


def test_a_verdict_names_the_match_it_cut(page: Any, written: Written, tmp_path: Path) -> None:
    """Exact copies judged not duplicates: the pair shows the verdict and the match it cut."""
    page.goto(f"{written.url}#{pair_id(*JUDGED)}")
    pair = page.locator(f'details.pair[id="{pair_id(*JUDGED)}"]')
    assert pair.get_attribute("open") is not None
    card = page.locator("article.item", has=pair)
    assert "Declared not a duplicate, so kept apart." in card.locator("p.why").inner_text()
    assert pair.locator(".cut-line").count() == 1  # its own match: said once
    cut = pair.locator(".cut-line").first.inner_text()
    assert cut == f"To part them, this verdict cut 1 match: {JUDGED[0]} ⟷ {JUDGED[1]}"
    assert "two products" in pair.locator(".verdict-line").inner_text()
    shot = Path(os.environ.get("DEDUP_STORE_CUT_SCREENSHOT", tmp_path / "cut.png"))
    pair.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000


def docs_screenshot(page: Any, written: Written, out: Path) -> None:
    """The screenshot of docs/reviewing.md: the overview, and the real near-duplicates with
    the most changed words opened below it."""
    data = read_report(written.path)
    candidates = [
        p for p in data.pairs if p["t"] == "text" and p["m"] in ("minhash", "simhash")
        and PLANTED not in (p["a"], p["b"])
    ]  # fmt: skip
    chosen = max(candidates, key=lambda p: sum(s[0] != 0 for s in p["d"]))
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.goto(written.url)
    page.fill("#search", chosen["b"])
    page.wait_for_function("document.querySelectorAll('article.item').length === 1")
    pair = page.locator(f'details.pair[id="{pair_id(chosen["a"], chosen["b"])}"]')
    pair.locator("summary").click()
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(out))


def test_word_counts_say_what_they_count(page: Any, written: Written) -> None:
    """The members' table counted canonical words and a pair's view the words shown, both as
    "words" (98 against 163 for one document)."""
    page.goto(f"{written.url}#pair-bash--{PLANTED}")
    headers = page.locator("table.members th").all_inner_texts()
    assert "canonical words" in headers
    legend = page.locator(f"details#pair-bash--{PLANTED} .legend").inner_text()
    assert "(as shown, stop words included)" in legend
