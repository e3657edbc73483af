"""PostgreSQL settings for dedup_store's work, sized from a machine's memory and cores.

The embedded server starts with them: its ``postgresql.conf`` includes a file of
:data:`CONF_NAME` that :func:`write_embedded_conf` keeps up to date. ``dedup-store db tune``
prints them for a server of one's own (``--memory`` and ``--cores`` size them for another
machine than the one it runs on).

What the work needs from the server:

- the per-slot key indexes of a growing store stay in memory, so incremental ingest and
  ``check`` keep their speed (``shared_buffers``, ``effective_cache_size``);
- the index builds that end a bulk load sort in memory, with parallel workers
  (``maintenance_work_mem``, ``max_parallel_maintenance_workers``);
- a load of millions of documents is not cut into checkpoints every minute (``max_wal_size``,
  ``checkpoint_timeout``);
- on the embedded server only, which has no replicas and no WAL archive: ``wal_level`` minimal,
  so the tables a bulk load fills in a new store, and the indexes it builds, skip the WAL.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The file of the embedded server's data directory that holds these settings.
CONF_NAME = "dedup_store.conf"
_INCLUDE = f"include_if_exists = '{CONF_NAME}'"
_MB = 2**20
_GB = 2**30
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "k": 2**10, "m": _MB, "g": _GB, "t": 2**40}
#: The least memory the settings are made for: ``shared_buffers`` alone takes 128MB.
MIN_MEMORY = 512 * _MB


@dataclasses.dataclass(frozen=True)
class Setting:
    """One server setting.

    Attributes:
        name: The parameter's name.
        value: Its value, as ``postgresql.conf`` spells it.
        why: What it does for the store.
        restart: Whether the server must restart for it to take effect (otherwise a reload does).
    """

    name: str
    value: str
    why: str
    restart: bool = False


def machine() -> tuple[int, int]:
    """``(memory in bytes, cores)`` of this machine."""
    import psutil  # only here: a command that starts no server does not import it

    return int(psutil.virtual_memory().total), os.cpu_count() or 1


def parse_size(text: str) -> int:
    """Bytes of a size with a unit, as PostgreSQL writes them: ``16GB``, ``512MB``, ``8kB`` (or
    ``512MiB``, ``8g``; case does not matter, and kilo means 1024).

    Raises:
        ValueError: ``text`` is not a size, or a number without a unit.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (examples: 16GB, 512MB)")
    if match.group(2) is None:
        raise ValueError(f"{text.strip()!r} has no unit: give one, e.g. 64GB or 512MB")
    unit = match.group(2).lower()[:1]
    return int(float(match.group(1)) * _UNITS[unit])


def server_settings(memory: int, cores: int, *, embedded: bool = False) -> list[Setting]:
    """The settings for a server with ``memory`` bytes and ``cores`` cores.

    Args:
        memory: The machine's memory in bytes (the server shares it with its clients).
        cores: The machine's cores.
        embedded: Add the settings only the embedded server takes (no WAL for bulk loads into
            a new store, which rules out replicas and WAL archiving).

    Raises:
        ValueError: less memory than :data:`MIN_MEMORY`.
    """
    if memory < MIN_MEMORY:
        raise ValueError(
            f"too little memory for a server of dedup_store: {memory:,} bytes; the settings "
            f"need at least {_size(MIN_MEMORY)}"
        )
    # the process that runs CREATE INDEX sorts a share of the rows too: on 2 cores a build with
    # one worker took 255 ms an index, with two 280 ms (1M rows of an index build)
    workers = max(0, min(4, cores - 1))
    settings = [
        Setting(
            "shared_buffers",
            _size(_clamp(memory // 8, 128 * _MB, 8 * _GB)),
            "an eighth of memory: the key indexes' hot pages stay cached as the store grows",
            restart=True,
        ),
        Setting(
            "effective_cache_size",
            _size(memory // 2),
            "what the planner may count on the operating system to cache",
        ),
        Setting(
            "maintenance_work_mem",
            _size(_clamp(memory // 16, 64 * _MB, 2 * _GB)),
            "index builds at the end of a bulk load sort in memory",
        ),
        Setting(
            "max_parallel_maintenance_workers",
            str(workers),
            "index builds use the machine's cores (the building process sorts its share too)",
        ),
        Setting(
            "max_worker_processes",
            str(max(8, cores + 4)),
            "room for the parallel workers",
            restart=True,
        ),
        Setting("max_parallel_workers", str(max(8, cores)), "room for the parallel workers"),
        Setting("max_wal_size", "8GB", "a large load is not cut into a checkpoint a minute"),
        Setting("min_wal_size", "1GB", "WAL files are recycled rather than made anew"),
        Setting("checkpoint_timeout", "30min", "fewer checkpoints during long loads"),
        Setting("checkpoint_completion_target", "0.9", "checkpoint writes spread out"),
    ]
    if embedded:
        settings += [
            Setting(
                "wal_level",
                "minimal",
                "a bulk load into a new store writes its tables and indexes without WAL",
                restart=True,
            ),
            Setting("max_wal_senders", "0", "required by wal_level minimal", restart=True),
        ]
    return settings


def conf_text(settings: Sequence[Setting], heading: str) -> str:
    """``settings`` as ``postgresql.conf`` lines, each with its reason, under ``heading``."""
    lines = [f"# {line}" if line else "#" for line in heading.splitlines()]
    width = max(len(f"{s.name} = '{s.value}'") for s in settings)
    for s in settings:
        assignment = f"{s.name} = '{s.value}'"
        restart = "; needs a restart" if s.restart else ""
        lines.append(f"{assignment:<{width}}  # {s.why}{restart}")
    return "\n".join(lines) + "\n"


def write_embedded_conf(pgdata: Path) -> bool:
    """Size the embedded server in ``pgdata`` for this machine: write :data:`CONF_NAME` and
    include it from ``postgresql.conf``. Takes effect when the server (re)starts.

    Returns:
        Whether anything changed.
    """
    memory, cores = machine()
    heading = (
        f"dedup_store's settings for its embedded server, sized for {_size(memory)} of memory"
        f" and {cores} cores.\nWritten again at every start of the server: change them in"
        " postgresql.auto.conf (ALTER SYSTEM), which is read after this file."
    )
    # a machine smaller than the settings are made for gets those of the smallest one
    settings = server_settings(max(memory, MIN_MEMORY), cores, embedded=True)
    wanted = conf_text(settings, heading)
    changed = _write_if_different(pgdata / CONF_NAME, wanted)
    main = pgdata / "postgresql.conf"
    lines = main.read_text().splitlines()
    if _INCLUDE not in lines:
        main.write_text("\n".join([*lines, _INCLUDE]) + "\n")
        changed = True
    return changed


def _write_if_different(path: Path, content: str) -> bool:
    try:
        if path.read_text() == content:
            return False
    except FileNotFoundError:
        pass
    path.write_text(content)
    owner = path.parent.stat()
    if (path.stat().st_uid, path.stat().st_gid) != (owner.st_uid, owner.st_gid):
        os.chown(path, owner.st_uid, owner.st_gid)  # the server may run as another user
    return True


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def memory_note(storage: Mapping[str, int]) -> str | None:
    """What to tell an operator whose store's indexes outgrow the server's ``shared_buffers``
    (``storage`` as :attr:`~dedup_store.results.Stats.storage` gives it), else ``None``.

    Incremental ingest and ``check`` touch the key and excerpt indexes at random; once those
    outgrow ``shared_buffers``, most of their pages come through the kernel's page cache, and
    a write or a lookup costs more the larger the store: on a 2-core machine with the stock
    128MB, while ~600-word documents were appended to 100k of them, a third of the server's
    time went to the kernel copying pages in and out of its page cache.
    """
    indexes, buffers = storage.get("indexes", 0), storage.get("shared_buffers", 0)
    if not buffers or indexes <= buffers:
        return None
    return (
        f"note: the store's indexes ({_size(indexes)}) outgrow the server's shared_buffers "
        f"({_size(buffers)}): incremental ingest and check slow down as the store grows; "
        "`dedup-store db tune` prints settings sized for the server's machine"
    )


def _size(size: int) -> str:
    """``size`` bytes rounded down to whole MB or GB, as PostgreSQL writes sizes."""
    if size >= _GB and size % _GB < _GB // 16:
        return f"{size // _GB}GB"
    return f"{size // _MB}MB"
