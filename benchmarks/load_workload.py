"""The texts of :mod:`benchmarks.load`: every ``check`` and ``add`` of a run, made before any
timer starts, from the corpus' vocabulary and edited copies of stored documents.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import numpy as np

from benchmarks.ingest_corpus import Indices, IngestCorpus

#: Every document the benchmark adds has an id starting with this (the corpus ids start with d).
ADD_PREFIX = "load-"
ADD_EVERY = 5
"""One operation in ``ADD_EVERY`` is an ``add``, the others are ``check`` calls (4:1)."""
SHARED_EVERY = 5
"""One ``add`` in ``SHARED_EVERY`` of every client is a copy of a document shared by all."""
WARM_UP_CHECKS = 50
WARM_UP_ADDS = 10
EDITED_SOURCES = 5000
Op = tuple[str, str, str]
"""``(kind, id, text)``: ``kind`` is ``check`` (``id`` empty) or ``add``."""


@dataclasses.dataclass
class Workload:
    """Every text of a run, prepared before any timer starts.

    Attributes:
        warm_checks: untimed ``check`` texts (new documents).
        warm_adds: untimed ``add`` records of the single client.
        single: the single client's ``(check text, (add id, add text))`` rounds.
        clients: each client's operations.
        profile: ``add`` records for ``--profile``.
    """

    warm_checks: list[str]
    warm_adds: list[tuple[str, str]]
    single: list[tuple[str, tuple[str, str]]]
    clients: list[list[Op]]
    profile: list[tuple[str, str]]

    def texts(self) -> dict[str, str]:
        """``{id: text}`` of every document the run may add."""
        records = [*self.warm_adds, *(add for _, add in self.single), *self.profile]
        records += [(i, t) for ops in self.clients for kind, i, t in ops if kind == "add"]
        return dict(records)


class TextMaker:
    """New documents and edited copies, from the corpus' vocabulary and a separate stream."""

    def __init__(self, corpus: IngestCorpus, sources: Sequence[Indices], seed: int) -> None:
        self.corpus = corpus
        self.sources = sources
        self.rng = np.random.default_rng([seed, 11])

    def new_indices(self) -> Indices:
        """Word indices of a new document, as long as the corpus' documents."""
        length = int(self.rng.integers(self.corpus.low, self.corpus.high + 1))
        return self.corpus.draw(length, self.rng)

    def new(self) -> str:
        """A new document."""
        return self.corpus.text(self.new_indices())

    def edited(self, indices: Indices | None = None) -> str:
        """An edited copy of ``indices``, by default of a random stored document."""
        if indices is None:
            indices = self.sources[int(self.rng.integers(len(self.sources)))]
        return self.corpus.text(self.corpus.edit(indices, self.rng))

    def mixed(self) -> str:
        """A new document or an edited copy of a stored one, with even odds."""
        return self.new() if self.rng.random() < 0.5 else self.edited()


def make_workload(maker: TextMaker, args: argparse.Namespace) -> Workload:
    """The texts of every phase, ids ``load-w-*``, ``load-s-*``, ``load-p-*``, ``load-c<k>-*``."""
    warm_adds = [(f"{ADD_PREFIX}w-{i:05d}", maker.mixed()) for i in range(WARM_UP_ADDS)]
    single = [
        (maker.mixed(), (f"{ADD_PREFIX}s-{i:05d}", maker.mixed())) for i in range(args.single)
    ]
    profile = [(f"{ADD_PREFIX}p-{i:05d}", maker.mixed()) for i in range(args.profile)]
    adds = -(-args.ops // ADD_EVERY)
    shared = [maker.new_indices() for _ in range(-(-adds // SHARED_EVERY))]
    clients: list[list[Op]] = []
    for client in range(args.clients):
        ops: list[Op] = []
        for i in range(args.ops):
            slot = i // ADD_EVERY
            if i % ADD_EVERY != ADD_EVERY - 1:
                ops.append(("check", "", maker.mixed()))
            elif slot % SHARED_EVERY == 0:
                group = slot // SHARED_EVERY
                own = client == group % args.clients
                text = maker.corpus.text(shared[group]) if own else maker.edited(shared[group])
                ops.append(("add", f"{ADD_PREFIX}c{client}-{slot:05d}", text))
            else:
                ops.append(("add", f"{ADD_PREFIX}c{client}-{slot:05d}", maker.mixed()))
        clients.append(ops)
    return Workload(
        [maker.new() for _ in range(WARM_UP_CHECKS)], warm_adds, single, clients, profile
    )
