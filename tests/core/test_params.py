"""FingerprintParams: validation, JSON, comparison."""

from __future__ import annotations

import dataclasses
import json

import pytest

from dedup_store.core import FingerprintParams
from dedup_store.errors import InvalidParamsError, ParamsMismatchError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"shingle_size": 0}, "shingle_size must be an integer in [1, 64], got 0"),
        ({"num_perm": 1}, "num_perm must be an integer in [2, 1024], got 1"),
        ({"num_perm": 84.0}, "num_perm must be an integer in [2, 1024], got 84.0"),
        ({"num_perm": True}, "num_perm must be an integer in [2, 1024], got True"),
        ({"threshold": 0}, "threshold must be a number in (0, 1], got 0"),
        ({"threshold": 1.5}, "threshold must be a number in (0, 1], got 1.5"),
        ({"containment": -0.1}, "containment must be a number in [0, 1], got -0.1"),
        ({"scheme": "magic"}, "scheme must be one of threshold, broder, got 'magic'"),
        ({"html": "yes"}, "html must be one of auto, always, never, got 'yes'"),
        ({"stem": "no"}, "stem must be true or false, got 'no'"),
        ({"simhash_k": 5}, "simhash_blocks must exceed simhash_k (pigeonhole rule)"),
        ({"scheme": "broder", "num_perm": 5}, "scheme 'broder' needs num_perm >= 6, got 5"),
        ({"simhash_blocks": 16, "simhash_k": 8}, "gives 12870 block keys per document"),
        ({"canonical_version": 3}, "canonical_version must be an integer in [1, 2], got 3"),
        ({"meta_weight": 1.5}, "meta_weight must be a number in [0, 1], got 1.5"),
        ({"meta_fields": ["tags"]}, "meta_fields must be names of fields"),
        ({"meta_fields": ("tags", "")}, "meta_fields must be names of fields"),
        ({"meta_fields": (" tags",)}, "meta_fields must be names of fields"),
        ({"meta_fields": ("tags", "tags")}, "meta_fields must be distinct"),
    ],
)
def test_invalid_params_name_the_value(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        FingerprintParams(**changes)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_params_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        FingerprintParams().num_perm = 3  # type: ignore[misc]


def test_json_round_trip() -> None:
    params = FingerprintParams(
        shingle_size=5, scheme="broder", simhash_blocks=5, stem=True, html="never", seed=9
    )
    text = params.to_json()
    assert '"format": 5' in text and '"canonical_version": 2' in text
    assert FingerprintParams.from_json(text) == params
    assert FingerprintParams.from_dict(params.to_dict()) == params


def test_stores_of_the_first_format_keep_their_match_rules() -> None:
    recorded = {k: v for k, v in FingerprintParams().to_dict().items()}
    del recorded["simhash_min_jaccard"], recorded["containment_merges"]
    old = FingerprintParams.from_stored({"format": 1, **recorded})
    assert (old.simhash_min_jaccard, old.containment_merges) == (0.0, True)
    assert FingerprintParams.from_stored(json.loads(FingerprintParams().to_json())) == (
        FingerprintParams()
    )


def test_stores_made_before_canonical_version_2_keep_version_1() -> None:
    recorded = FingerprintParams().to_dict()
    del recorded["canonical_version"]
    for recorded_format in (1, 2):
        old = FingerprintParams.from_stored({"format": recorded_format, **recorded})
        assert old.canonical_version == 1
        assert FingerprintParams.from_json(old.to_json()) == old
    # chosen by hand (no format number): today's canonicalization unless named
    assert FingerprintParams.from_dict({"shingle_size": 5}).canonical_version == 2
    assert FingerprintParams.from_dict({"canonical_version": 1}).canonical_version == 1
    with pytest.raises(ParamsMismatchError, match="canonical_version: 1 != 2"):
        old.require_same(FingerprintParams(), "store 'main'")


def test_stores_made_before_weighted_simhash_keep_counts() -> None:
    recorded = FingerprintParams().to_dict()
    del recorded["simhash_weights"]
    for recorded_format in (1, 2, 3):
        old = FingerprintParams.from_stored({"format": recorded_format, **recorded})
        assert old.simhash_weights == "count" and not old.weighted
    weighted = FingerprintParams(simhash_weights="tfidf-length")
    assert FingerprintParams.from_json(weighted.to_json()) == weighted
    with pytest.raises(ParamsMismatchError, match="simhash_weights: 'count' != 'tfidf'"):
        old.require_same(FingerprintParams(simhash_weights="tfidf"), "store 'main'")
    with pytest.raises(InvalidParamsError, match="simhash_weights must be one of count"):
        FingerprintParams(simhash_weights="bm25")  # type: ignore[arg-type]


def test_metadata_sets_are_off_in_older_stores_and_round_trip() -> None:
    recorded = FingerprintParams().to_dict()
    del recorded["meta_fields"], recorded["meta_weight"]
    for recorded_format in (1, 2, 3, 4):
        old = FingerprintParams.from_stored({"format": recorded_format, **recorded})
        assert old.meta_fields == () and not old.uses_meta
    tagged = FingerprintParams(meta_fields=("tags", "keywords"), meta_weight=0.1)
    assert json.loads(tagged.to_json())["meta_fields"] == ["tags", "keywords"]
    assert FingerprintParams.from_json(tagged.to_json()) == tagged
    with pytest.raises(ParamsMismatchError, match="meta_fields: \\[\\] != \\['tags'\\]"):
        old.require_same(FingerprintParams(meta_fields=("tags",)), "store 'main'")
    with pytest.raises(ParamsMismatchError, match=r"meta_weight: 0\.1 != 0\.15"):
        tagged.require_same(dataclasses.replace(tagged, meta_weight=0.15))


def test_bad_json_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="not valid JSON"):
        FingerprintParams.from_json("{nope")
    with pytest.raises(InvalidParamsError, match="must be a JSON object"):
        FingerprintParams.from_json("[1, 2]")
    with pytest.raises(InvalidParamsError, match="unknown fingerprint parameters: colour"):
        FingerprintParams.from_json('{"colour": "blue"}')


def test_derived_values() -> None:
    assert FingerprintParams().bands == (12, 7)
    assert FingerprintParams().band_key_count == 12
    broder = FingerprintParams(scheme="broder")
    assert broder.bands == (6, 14) and broder.band_key_count == 15
    assert FingerprintParams(simhash_blocks=4, simhash_k=3).block_key_count == 4
    assert FingerprintParams(simhash_blocks=5, simhash_k=3).block_key_count == 10


def test_mismatch_names_every_difference() -> None:
    ours, theirs = FingerprintParams(), FingerprintParams(num_perm=128, stem=True)
    assert ours.diff(theirs) == {"num_perm": (84, 128), "stem": (False, True)}
    ours.require_same(FingerprintParams())
    with pytest.raises(ParamsMismatchError) as info:
        ours.require_same(theirs, "store 'main'")
    assert str(info.value) == (
        "store 'main': fingerprint parameters differ (num_perm: 84 != 128, stem: False != True)"
    )
    assert info.value.differences == {"num_perm": (84, 128), "stem": (False, True)}


def test_lowest_jaccard_of_a_match() -> None:
    assert FingerprintParams(threshold=0.9, simhash_min_jaccard=1.0).lowest_jaccard == 0.9
    tagged = FingerprintParams(threshold=0.9, simhash_min_jaccard=1.0, meta_fields=("tags",))
    assert tagged.lowest_jaccard == pytest.approx(0.75 / 0.85)
    assert dataclasses.replace(tagged, meta_weight=1.0).lowest_jaccard == 0.0
    assert FingerprintParams().lowest_jaccard == 0.3
