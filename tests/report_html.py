"""Reading a written review report back: its data blocks; and the browser that opens it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.report import CHROMIUM as CHROMIUM
from benchmarks.report import CHROMIUM_ARGS as CHROMIUM_ARGS

_BLOCK = re.compile(r'<script type="application/json" id="([\w-]+)">(.*?)</script>', re.S)


@dataclasses.dataclass
class ReportData:
    """The data of a report file.

    Attributes:
        index: the index block (methods, notes, one row per item).
        ids: the external ids of each item.
        pages: the items of each page, in order.
    """

    index: dict[str, Any]
    ids: list[list[str]]
    pages: list[list[dict[str, Any]]]

    @property
    def items(self) -> list[dict[str, Any]]:
        """Every item, in the report's order."""
        return [item for page in self.pages for item in page]

    @property
    def clusters(self) -> list[dict[str, Any]]:
        """The clusters."""
        return [item for item in self.items if item["k"] == "c"]

    @property
    def pairs(self) -> list[dict[str, Any]]:
        """Every pair, in clusters and across them."""
        found = []
        for item in self.items:
            found += item["pairs"] if item["k"] == "c" else [item]
        return found

    def pair(self, a: str, b: str) -> dict[str, Any]:
        """The pair of ``a`` and ``b``."""
        return next(p for p in self.pairs if (p["a"], p["b"]) in ((a, b), (b, a)))


def read_report(path: Path) -> ReportData:
    """The data blocks of the report at ``path``."""
    blocks = {name: json.loads(body) for name, body in _BLOCK.findall(path.read_text("utf-8"))}
    pages = []
    while f"page-{len(pages)}" in blocks:
        pages.append(blocks[f"page-{len(pages)}"])
    return ReportData(blocks["report-index"], blocks["report-ids"], pages)
