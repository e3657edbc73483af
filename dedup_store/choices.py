"""The values of the fingerprint parameters that are one of a few names.

They live outside :mod:`dedup_store.core` so that the command line can offer them without
importing the core (and numpy); :mod:`dedup_store.core.params` checks them.
"""

from __future__ import annotations

from typing import Literal

#: MinHash band schemes.
Scheme = Literal["threshold", "broder"]
#: Whether input is HTML.
HtmlMode = Literal["auto", "always", "never"]
#: How candidates are scored.
VerifyMode = Literal["exact", "estimate"]
#: How the features of a SimHash are weighted.
SimhashWeights = Literal["count", "tfidf", "tfidf-length"]
