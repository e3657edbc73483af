from dedup_store.core import FingerprintParams, fingerprint


def test_near_duplicates_share_band_key() -> None:
    text = "the quick brown fox jumps over the lazy dog near the river bank " * 3
    a = fingerprint(text, FingerprintParams())
    b = fingerprint(text + " and then sleeps", FingerprintParams())
    assert a.jaccard(b) > 0.8
    assert set(a.band_keys) & set(b.band_keys)
