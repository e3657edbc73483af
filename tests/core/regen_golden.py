"""Regenerate ``tests/golden/fingerprints.json`` (never run by CI).

Run ``python -m tests.core.regen_golden`` after an intended change of the fingerprints, then
review ``git diff tests/golden`` and commit it with the change that caused it. The documents and
parameters of each case live here; the expected values are whatever the current code computes.
"""

from __future__ import annotations

import json
from typing import Any

from dedup_store.core import FingerprintParams
from tests.core.golden import GOLDEN_PATH, meta_record, record

ENGLISH = (
    "The river rose steadily through the night, and by morning the lower fields were under "
    "water. Farmers who had planted early moved their equipment to higher ground, while the "
    "county engineers opened the spillway to relieve pressure on the old stone dam.\n\n"
    "Officials said the reservoir would return to its normal level within a week if the rain "
    "eased. Residents of the valley were asked to avoid the flooded roads and to report any "
    "damaged power lines to the utility company."
)
RUSSIAN = (
    "Река поднималась всю ночь, и к утру нижние поля оказались под водой. Фермеры, которые "
    "посеяли рано, перегнали технику на возвышенность, а районные инженеры открыли водосброс, "
    "чтобы снизить давление на старую каменную плотину.\n\n"
    "Чиновники заявили, что водохранилище вернётся к обычному уровню в течение недели, если "
    "дожди ослабнут. Жителей долины попросили не ездить по затопленным дорогам."
)
CHINESE = (
    "河水整夜不断上涨，到了早上，低处的田地已经被淹没。提前播种的农民把机器搬到了高地上，"
    "县里的工程师打开了泄洪道，以减轻旧石坝承受的压力。\n\n"
    "官员表示，如果降雨减弱，水库将在一周内恢复到正常水位。当局要求山谷里的居民避开被淹的道路。"
)
MIXED = (
    "Release 2.4 of the parser adds support for 中文分词 and русская морфология. The new "
    "tokenizer splits 混合文本 into runs by script: Latin words, кириллица, and CJK characters "
    "are each handled on their own. Ｆｕｌｌｗｉｄｔｈ letters and ligatures like ﬁle are "
    "normalized first."
)
HTML = (
    "<!DOCTYPE html><html><head><title>Flood report</title>"
    "<style>p { color: red }</style><script>var tracking = 'do not index';</script></head>"
    "<body><h1>Valley&nbsp;flooding</h1><!-- editor: check figures -->"
    "<p>The river rose <b>steadily</b> through the night &amp; the lower fields flooded."
    "</p><p>Engineers opened the spillway&hellip;</p><ul><li>Roads closed</li><li>Power lines "
    "down</li></ul><div>Residents&#39; meeting at the town hall on Friday.</div></body></html>"
)
SHORT = "Flooded roads, closed."
# the Chinese text as scraped or typed: spaces between characters, ideographic spaces, lines
# wrapped anywhere, ASCII punctuation (the same canonical text as CHINESE from version 2 on)
CHINESE_SPACED = (
    "河 水 整 夜 不 断 上 涨 ,  到 了 早 上 ， 低 处 的\n田 地 已 经 被 淹 没 。提前播种的"
    "农民把机\r\n器搬到了高地上,县里的工程师打开了泄洪道，以减轻旧石坝承受的压力。\n\n"
    "官员表示\u3000如果降雨减弱 ，水库将在一周内恢复到\n正常水位. 当局要求山谷里的居民"
    "避开被淹的道路"
)

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("english", {}, ENGLISH),
    ("english-stemmed-broder", {"stem": True, "scheme": "broder"}, ENGLISH),
    ("english-no-stopwords-m5", {"stopwords": False, "simhash_blocks": 5}, ENGLISH),
    ("russian", {}, RUSSIAN),
    ("russian-stemmed", {"stem": True}, RUSSIAN),
    ("chinese", {}, CHINESE),
    ("chinese-no-stopwords", {"stopwords": False, "cjk_shingle_size": 2}, CHINESE),
    ("mixed", {}, MIXED),
    ("html", {}, HTML),
    ("html-never", {"html": "never"}, HTML),
    ("short", {"shingle_size": 5}, SHORT),
    ("chinese-spaced", {}, CHINESE_SPACED),
    # longer than simhash_key_max_shingles: block keys of the whole SimHash
    ("english-whole-simhash-keys", {"simhash_key_max_shingles": 20}, ENGLISH),
]
# Weighted SimHash: each document weighed against a store of the other golden documents
# (repeated past the fallback to counts, golden.GOLDEN_STORE_COPIES times each).
WEIGHTED_CASES = [
    (f"{name}-{weights}", {"simhash_weights": weights}, text)
    for weights in ("tfidf", "tfidf-length")
    for name, text in (
        ("english", ENGLISH),
        ("russian", RUSSIAN),
        ("chinese", CHINESE),
        ("mixed", MIXED),
        ("html", HTML),
    )
]
# Stores made before canonical version 2 keep their fingerprints: every case in version 1 too.
V1_CASES = [
    (f"v1-{name}", {**overrides, "canonical_version": 1}, text) for name, overrides, text in CASES
]


# Metadata sets: members of several fields and forms (a string, a list, case and width to
# normalize), and a document without any.
META_CASES: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    (
        "english-meta",
        {"meta_fields": ("tags", "keywords", "links")},
        ENGLISH,
        {
            "tags": ["Flood", " dam ", "ＶＡＬＬＥＹ"],
            "keywords": "spillway",
            "links": ["https://example.org/river"],
            "author": "not a set field",
        },
    ),
    (
        "chinese-meta",
        {"meta_fields": ("tags",), "num_perm": 128},
        CHINESE,
        {"tags": ["洪水", "水库"]},
    ),
    ("russian-meta-none", {"meta_fields": ("tags",)}, RUSSIAN, {"tags": [], "other": ["x"]}),
]


def build() -> dict[str, Any]:
    """The golden file's content, computed with the current code."""
    cases = []
    for name, overrides, text in CASES + V1_CASES + WEIGHTED_CASES:
        params = FingerprintParams(**overrides)
        expected = record(text, params)
        cases.append({"name": name, "params": params.to_dict(), "text": text, "expected": expected})
    for name, overrides, text, meta in META_CASES:
        params = FingerprintParams(**overrides)
        cases.append(
            {
                "name": name,
                "params": params.to_dict(),
                "text": text,
                "meta": meta,
                "expected": record(text, params),
                "expected_meta": meta_record(text, params, meta),
            }
        )
    return {"regenerate_with": "python -m tests.core.regen_golden", "cases": cases}


def main() -> None:
    """Write the golden file."""
    GOLDEN_PATH.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(build(), ensure_ascii=False, indent=1) + "\n"
    GOLDEN_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {GOLDEN_PATH}")


if __name__ == "__main__":
    main()
