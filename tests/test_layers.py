"""The package's layers import in one direction: the pure core imports nothing of the database,
and no room of the database layer (``dedup_store/db/<room>/``) imports a room that imports it,
directly or through others."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dedup_store"
DB = PACKAGE / "db"
ROOMS = sorted(p.name for p in DB.iterdir() if (p / "__init__.py").is_file())


def imported_modules(path: Path) -> Iterator[str]:
    """Every absolute module a file imports, at its top, in a function or for type checking."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def room_imports() -> dict[str, set[str]]:
    """For each room, the other rooms its modules import."""
    graph: dict[str, set[str]] = {room: set() for room in ROOMS}
    for room in ROOMS:
        for path in (DB / room).rglob("*.py"):
            for module in imported_modules(path):
                parts = module.split(".")
                if parts[:2] == ["dedup_store", "db"] and len(parts) > 2 and parts[2] in graph:
                    graph[room].add(parts[2])
        graph[room].discard(room)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        room = todo.pop()
        if room not in seen:
            seen.add(room)
            todo.extend(graph[room])
    return seen


def test_no_room_of_the_database_layer_imports_a_room_that_imports_it() -> None:
    graph = room_imports()
    assert {"candidates", "matches", "rows", "schema", "server", "write"} <= set(ROOMS)
    circles = sorted(
        (room, other) for room in ROOMS for other in graph[room] if room in reachable(graph, other)
    )
    assert circles == []


def test_the_rooms_below_import_none_above_them() -> None:
    graph = room_imports()
    assert reachable(graph, "server") <= {"schema"}
    assert reachable(graph, "rows") <= {"schema", "server"}
    assert "write" not in reachable(graph, "candidates") | reachable(graph, "matches")


def test_the_core_imports_nothing_of_the_database() -> None:
    for path in (PACKAGE / "core").rglob("*.py"):
        for module in imported_modules(path):
            assert not module.startswith(("dedup_store.db", "sqlalchemy", "psycopg")), path
