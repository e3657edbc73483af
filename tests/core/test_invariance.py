"""The canonical text, and so the fingerprint, does not depend on how a text is formatted.

Documents are drawn as sentences of English, Russian and Chinese words (Chinese sentences with
an occasional Latin word or number), then rendered twice: once plainly, once with every
formatting choice drawn at random (line wrapping, whitespace of every width, CRLF, no-break and
thin spaces, case, quote and dash styles, hyphens in compound words, fullwidth and compatibility
forms, decomposed letters, spaces and line breaks between Chinese characters). Both renderings
must give the same canonical text and the same fingerprint, one by one and in batches, with the
compiled kernels and with the reference ones.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_store.core import FingerprintParams, canonicalize, fingerprint_batch, kernels
from dedup_store.core.canonical import canonical_batch
from tests.core.conftest import BACKENDS
from tests.core.golden import fingerprint_record


def _words(text: str) -> list[str]:
    return text.split()


ENGLISH = _words(
    "river rose steadily through the night and by morning lower fields were under water "
    "farmers who had planted early moved their equipment to higher ground while county "
    "engineers opened spillway officials said reservoir would return normal level within "
    "week if rain eased residents asked avoid flooded roads report damaged power lines "
    "office efficient affluent flight first"
)
ENGLISH_COMPOUNDS = ["well-known", "e-mail", "long-term", "state-of-the-art", "follow-up"]
RUSSIAN = _words(
    "река поднималась всю ночь и к утру нижние поля оказались под водой фермеры которые "
    "посеяли рано перегнали технику на возвышенность районные инженеры открыли водосброс "
    "чтобы снизить давление на старую каменную плотину чиновники заявили что водохранилище "
    "вернётся к обычному уровню если дожди ослабнут жителей долины попросили ёлка йогурт"
)
RUSSIAN_COMPOUNDS = ["северо-запад", "кое-что", "из-за", "во-первых", "юго-восток"]
CHINESE = _words(
    "河水 整夜 不断 上涨 到了 早上 低处 的 田地 已经 被 淹没 提前 播种 农民 把 机器 搬到 高地 "
    "县里 工程师 打开 泄洪道 以 减轻 石坝 承受 压力 官员 表示 如果 降雨 减弱 水库 将 在 一周 内 "
    "恢复 正常 水位 当局 要求 山谷 里 居民 避开 道路 算法 文档 特征 集合 相似度 网页 去重 "
    "〇一九年 人々"
)
LATIN_IN_CHINESE = ["Python", "SimHash", "MinHash", "2019", "3", "150", "Bloom"]

WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", " \r\n ", "\u00a0", "\u2007", "\u2009", "\u202f"]
WHITESPACE += ["\u3000", "\u200b", "\u2003", "\n\n"]
# what may stand between two Chinese characters, or between one and another word
CJK_GAPS = ["", " ", "  ", "\n", "\r\n", "\u3000", "\u00a0", "\u2009", "\u200b", " \n"]
HYPHENS = ["-", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\ufe63"]
HYPHENS += ["\uff0d", "_", "\uff3f", "\u2e3a", "\u00a0", "\u2009"]
DASHES = [" - ", " -- ", " \u2014 ", "\u2014", " \u2013 ", "\u2015", " \u2212 ", "\uff0d"]
QUOTES = [('"', '"'), ("\u201c", "\u201d"), ("\u00ab", "\u00bb"), ("\u201e", "\u201c")]
QUOTES += [("'", "'"), ("\u2018", "\u2019"), ("\u300c", "\u300d"), ("\uff02", "\uff02")]
SENTENCE_ENDS = [". ", ".  ", ".\n", "\uff0e", "\u3002", " . ", ".\r\n\r\n", "!\u00a0"]
CHINESE_ENDS = ["\u3002", "\uff0e", ". ", "\u3002\n", " \u3002 ", "\uff61", "\uff01", "!"]
LIGATURES = {"ffi": "\ufb03", "ff": "\ufb00", "fi": "\ufb01", "fl": "\ufb02"}

# (language, words, quoted): a sentence
Sentence = tuple[str, list[str], bool]
Choose = Callable[[Sequence[str]], str]


@st.composite
def sentences(draw: st.DrawFn) -> Sentence:
    """A sentence of English, Russian or Chinese words, sometimes in quotes."""
    language = draw(st.sampled_from(["en", "ru", "zh"]))
    if language == "en":
        pool = st.sampled_from(ENGLISH) | st.sampled_from(ENGLISH_COMPOUNDS)
    elif language == "ru":
        pool = st.sampled_from(RUSSIAN) | st.sampled_from(RUSSIAN_COMPOUNDS)
    else:
        pool = st.sampled_from(CHINESE) | st.sampled_from(LATIN_IN_CHINESE)
    words = draw(st.lists(pool, min_size=1, max_size=14))
    return language, words, draw(st.booleans())


DOCUMENTS = st.lists(sentences(), min_size=1, max_size=8)


def _is_cjk(word: str) -> bool:
    return word[0] >= "\u3005"


def _plain(options: Sequence[str]) -> str:
    return options[0]


def _render_word(word: str, language: str, choose: Choose) -> str:
    """A word as typed: hyphens of compounds, case, fullwidth, ligatures, decomposed letters."""
    if _is_cjk(word):
        # spaces or line breaks between the characters of a Chinese word
        return "".join(char + choose(CJK_GAPS) for char in word[:-1]) + word[-1]
    word = word.replace("-", choose(HYPHENS))
    word = {"lower": word, "upper": word.upper(), "title": word.title()}[
        choose(["lower", "upper", "title"])
    ]
    form = choose(["plain", "fullwidth", "ligatures", "nfd"])
    if form == "fullwidth" and word.isascii():
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in word)
    if form == "ligatures":
        for letters, ligature in LIGATURES.items():
            word = word.replace(letters, ligature)
    if form == "nfd":
        return unicodedata.normalize("NFD", word)
    return word


def _gap(before: str, after: str, choose: Choose) -> str:
    """What separates two words: any whitespace, or nothing next to a Chinese word."""
    if _is_cjk(before) or _is_cjk(after):
        return choose([" ", *CJK_GAPS])
    return choose(WHITESPACE)


def _render_sentence(sentence: Sentence, choose: Choose) -> str:
    language, words, quoted = sentence
    parts = [_render_word(words[0], language, choose)]
    for before, after in itertools.pairwise(words):
        dash = choose(["", "dash"]) if not (_is_cjk(before) or _is_cjk(after)) else ""
        parts.append(choose(DASHES) if dash else _gap(before, after, choose))
        parts.append(_render_word(after, language, choose))
    text = "".join(parts)
    if quoted:
        opening, closing = choose(["".join(pair) for pair in QUOTES])
        text = opening + text + closing
    return text + choose(CHINESE_ENDS if language == "zh" else SENTENCE_ENDS)


def render(document: list[Sentence], choose: Choose) -> str:
    """The document's sentences, each ended and separated as ``choose`` picks."""
    text = choose(["", *WHITESPACE])
    for sentence in document:
        text += _render_sentence(sentence, choose) + choose(["", *WHITESPACE])
    return text.replace("\n", choose(["\n", "\r\n"]))


PARAMS = st.builds(
    FingerprintParams,
    stopwords=st.booleans(),
    stem=st.booleans(),
    containment=st.sampled_from([0.0, 0.8]),
)


def _assert_same_fingerprints(plain: str, variant: str, params: FingerprintParams) -> None:
    expected = canonicalize(plain, params)
    assert canonicalize(variant, params) == expected
    for chosen in BACKENDS:
        assert chosen is not None, "dedup_store.core._kernels was not built"
        with kernels.use(chosen):
            batch = fingerprint_batch([plain, variant, plain], params)
            assert batch.canonical_texts == [expected] * 3
            first = fingerprint_record(batch.row(0))
            assert fingerprint_record(batch.row(1)) == first
            assert fingerprint_record(batch.row(2)) == first
            words = canonical_batch([plain, variant], params)
            if words is not None:
                assert words.texts == [expected] * 2


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=DOCUMENTS, data=st.data(), params=PARAMS)
def test_formatting_leaves_the_fingerprint_unchanged(
    document: list[Sentence], data: st.DataObject, params: FingerprintParams
) -> None:
    def drawn(options: Sequence[str]) -> str:
        return data.draw(st.sampled_from(options))

    plain = render(document, _plain)
    variant = render(document, drawn)
    if not canonicalize(plain, params):
        return  # stop words only
    _assert_same_fingerprints(plain, variant, params)


@settings(max_examples=100, deadline=None)
@given(document=DOCUMENTS, data=st.data())
def test_spaced_chinese_is_the_chinese_without_spaces(
    document: list[Sentence], data: st.DataObject
) -> None:
    chinese = [("zh", [w for w in words if _is_cjk(w)], q) for _, words, q in document]
    chinese = [sentence for sentence in chinese if sentence[1]]
    if not chinese:
        return
    packed = "".join("".join(words) + "\u3002" for _, words, _ in chinese)
    spaced = " ".join(packed)
    wrapped = "".join(c + data.draw(st.sampled_from(CJK_GAPS)) for c in packed)
    params = FingerprintParams(stopwords=False)
    assert canonicalize(spaced, params) == canonicalize(wrapped, params)
    assert canonicalize(packed, params) == packed.replace("\u3002", "")
    _assert_same_fingerprints(packed, spaced, params)
