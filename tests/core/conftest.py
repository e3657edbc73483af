"""The two kernel backends, for the tests that compare them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dedup_store.core import kernels

#: The compiled kernels (``None`` fails the tests that use them: they must be built) and the
#: reference ones.
BACKENDS = [kernels.COMPILED, kernels.REFERENCE]
BACKEND_IDS = ["compiled", "reference"]


@pytest.fixture(params=BACKENDS, ids=BACKEND_IDS)
def backend(request: pytest.FixtureRequest) -> Iterator[kernels.Backend]:
    """Each backend in turn, in use (:func:`dedup_store.core.kernels.use`) during the test."""
    chosen = request.param
    assert chosen is not None, "dedup_store.core._kernels was not built"
    with kernels.use(chosen):
        yield chosen
