"""Where the time of ``python -m benchmarks.load`` goes.

During the load run, :class:`WaitSampler` samples what the clients' server connections are doing
(waiting for the writers' lock, running a statement, waiting for their client, ...).

With ``--profile N``, :func:`profile_adds` shows where a single-client ``add`` spends its time.
For each of N documents, one ``check(text)`` then one ``add(id, text)``, as a CMS checks a draft
before publishing it. Three views:

* a timeline per call of the first half of the documents, from SQLAlchemy's public events on
  every ``Engine``: the pool checkout (after ``pool_pre_ping``), each statement from
  ``before_cursor_execute`` to ``after_cursor_execute`` (the first statement of a transaction
  includes psycopg's ``BEGIN``), the ``commit`` event, and the gaps between them; median and mean
  milliseconds per call of each segment;
* pyinstrument on the second half: milliseconds per call in the frames that matter (the ping,
  ``BEGIN``, each statement's wait for the server, psycopg's conversion of the statement text,
  ``COMMIT``, fingerprinting), then the call tree of ``add``;
* ``EXPLAIN (ANALYZE, BUFFERS)`` of the last ``add`` statement, prepared and run with a generic
  plan as the store runs it (``plan_cache_mode = force_generic_plan``), after deleting that
  document, in a transaction that is rolled back.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from sqlalchemy import Engine, event

from benchmarks.common import conninfo
from dedup_store import DedupStore

CLIENT_APP = "dedup_store_load_client"
"""The ``application_name`` of the load run's client connections."""
_PARAM = re.compile(r"%\((\w+)\)s")
TREE_LINES = 60
#: ``(label, function, ancestor function or None)``: pyinstrument frames timed per call.
FRAMES = (
    ("validate and fingerprint the text", "prepare_batch", None),
    ("fingerprint the text (check)", "fingerprint", "DedupStore.check"),
    ("pool checkout, of which:", "_ConnectionFairy._checkout", None),
    ("  ping (pool_pre_ping, SELECT 1)", "PGDialect_psycopg._do_ping_w_event", None),
    ("writers' locks, of which:", "lock_store", None),
    ("  BEGIN", "Connection._start_query", "lock_store"),
    ("  server round trip", "Connection.wait", "lock_store"),
    ("add statement: parameters", "fingerprint_parameters", "add_statement"),
    ("add statement: execute, of which:", "Cursor.execute", "DedupStore._add_rows"),
    ("  psycopg converting %(name)s (uncached)", "_query2pg_nocache", "DedupStore._add_rows"),
    ("  server round trip", "Cursor._maybe_prepare_gen", "DedupStore._add_rows"),
    ("check statement: execute, of which:", "Cursor.execute", "DedupStore.check"),
    ("  psycopg converting %(name)s (uncached)", "_query2pg_nocache", "DedupStore.check"),
    ("  server round trip", "Cursor._maybe_prepare_gen", "DedupStore.check"),
    ("COMMIT", "Connection.commit", None),
    ("return to the pool", "_ConnectionFairy._checkin", None),
)


def label(statement: str) -> str:
    """A short name for a statement of the store."""
    flat = " ".join(statement.split())
    if "pg_advisory_xact_lock" in flat:
        return "writers' locks"
    if flat.startswith("WITH known AS"):
        return "add statement"
    if flat.startswith("SELECT j.a, d.external_id"):
        return "check statement"
    if "reltuples" in flat:
        return "reltuples (refresh_statistics)"
    return flat[:40]


class Timeline:
    """Timestamps of one call's events, cut into named segments."""

    def __init__(self) -> None:
        self.kind = ""
        self.marks: list[tuple[str, float]] = []
        self.segments: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.last_add: tuple[str, dict[str, Any]] | None = None

    def mark(self, name: str) -> None:
        """Record an event of the current call."""
        if self.kind:
            self.marks.append((name, time.perf_counter()))

    def begin(self, kind: str) -> None:
        """Start timing a call of ``kind``."""
        self.kind, self.marks = kind, [("call", time.perf_counter())]

    def end(self) -> None:
        """Close the current call and add its segments."""
        self.mark("return")
        durations = self.segments[self.kind]
        seen: dict[str, int] = defaultdict(int)
        for (a, started), (b, ended) in itertools.pairwise(self.marks):
            same = a.startswith("> ") and b == "< " + a[2:]
            name = a[2:] if same else f"  gap: {a.lstrip('<> ')} -> {b.lstrip('<> ')}"
            seen[name] += 1
            key = name if seen[name] == 1 else f"{name} #{seen[name]}"
            durations[key].append((ended - started) * 1000)
        durations["whole call"].append((self.marks[-1][1] - self.marks[0][1]) * 1000)
        self.kind = ""

    def listen(self) -> list[tuple[Any, str, Any]]:
        """Register the event listeners; returns them for :func:`sqlalchemy.event.remove`."""

        def before(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            self.mark("> " + label(statement))
            if self.kind == "add" and statement.lstrip().startswith("WITH known AS"):
                self.last_add = (statement, dict(parameters))

        def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            self.mark("< " + label(statement))

        listeners: list[tuple[Any, str, Any]] = [
            (Engine, "before_cursor_execute", before),
            (Engine, "after_cursor_execute", after),
            (Engine, "commit", lambda conn: self.mark("COMMIT")),
            (Engine, "engine_connect", lambda conn: self.mark("checkout")),
        ]
        for target, name, fn in listeners:
            event.listen(target, name, fn)
        return listeners


def print_segments(timeline: Timeline, count: int) -> None:
    """Median and mean milliseconds per call of every segment, by kind of call."""
    for kind, durations in timeline.segments.items():
        print(f"\n== {kind}: median / mean ms per call over {count} calls ==")
        width = max(len(name) for name in durations)
        for name, values in durations.items():
            share = f"{len(values)}/{count} calls" if len(values) != count else ""
            print(f"{name:<{width}}  {np.median(values):>8.2f}  {np.mean(values):>8.2f}  {share}")


def explain(url: str, statement: str, parameters: dict[str, Any], repeat: int = 3) -> str:
    """The add statement's generic plan, run ``repeat`` times, each time rolled back."""
    names: list[str] = []
    for name in _PARAM.findall(statement):
        if name not in names:
            names.append(name)
    prepared = _PARAM.sub(lambda m: f"${names.index(m[1]) + 1}", statement).replace("%%", "%")
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(sql.SQL("PREPARE load_add AS {}").format(sql.SQL(prepared)))
        values = sql.SQL(", ").join(sql.Literal(parameters[n]) for n in names)
        query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS) EXECUTE load_add({})").format(values)
        plan: list[str] = []
        for _ in range(repeat):
            with conn.transaction(force_rollback=True):
                plan = [row[0] for row in conn.execute(query)]
    return "\n".join(plan)


def plan_summary(plan: Sequence[str]) -> list[str]:
    """The plan's top node, each CTE with the node under it, the writes, and the totals."""
    writes = ("Insert on", "Update on", "Trigger")
    wanted = {0, 1}
    for i, line in enumerate(plan):
        node = line.strip()
        if node.startswith("CTE ") and i + 1 < len(plan):
            wanted |= {i, i + 1}
        else:
            totals = node.startswith(("Planning", "Execution"))
            below = node.startswith("Buffers") and i - 1 in wanted
            if totals or below or any(w in node for w in writes):
                wanted.add(i)
    return [line for i, line in enumerate(plan) if i in wanted]


def frame_ms(root: Any, function: str, within: str | None, calls: int) -> float:
    """Milliseconds per call in frames named ``function`` (below one named ``within``)."""

    def total(frame: Any, inside: bool) -> float:
        name = f"{frame.class_name}.{frame.function}" if frame.class_name else frame.function
        if name == function and inside:
            return float(frame.time)
        inside = inside or name == within
        return sum(total(child, inside) for child in frame.children)

    return 1000 * total(root, within is None) / calls if root is not None else 0.0


def print_frames(profilers: dict[str, Any], calls: int) -> None:
    """Milliseconds per call of :data:`FRAMES`, for ``check`` and ``add``."""
    roots = {kind: p.last_session.root_frame() for kind, p in profilers.items()}
    print(f"\n== pyinstrument: ms per call over {calls} calls (profiler overhead included) ==")
    width = max(len(label) for label, _, _ in FRAMES)
    print(f"{'':<{width}}  {'check':>7}  {'add':>7}")
    print(
        f"{'whole call':<{width}}"
        + "".join(f"  {1000 * roots[k].time / calls:>7.2f}" for k in ("check", "add"))
    )
    for label, function, within in FRAMES:
        times = [frame_ms(roots[k], function, within, calls) for k in ("check", "add")]
        print(f"{label:<{width}}" + "".join(f"  {t:>7.2f}" if t else f"  {'-':>7}" for t in times))
    print("\n== pyinstrument: add (seconds in all) ==")
    tree = profilers["add"].output_text(unicode=True, color=False, short_mode=True)
    print("\n".join(tree.splitlines()[:TREE_LINES]))


def profile_adds(url: str, schema: str, records: Sequence[tuple[str, str]]) -> None:
    """Check then add each record, timed by events, then by pyinstrument; print the plan too."""
    from pyinstrument import Profiler

    half = len(records) // 2
    timeline = Timeline()
    listeners = timeline.listen()
    profilers = {k: Profiler(interval=0.0001, async_mode="disabled") for k in ("check", "add")}
    try:
        with DedupStore(url, schema=schema, create=False) as store:
            for external_id, text in records[:half]:
                for kind in ("check", "add"):
                    timeline.begin(kind)
                    if kind == "check":
                        store.check(text)
                    else:
                        store.add(external_id, text)
                    timeline.end()
            for target, name, fn in listeners:
                event.remove(target, name, fn)
            listeners = []
            for external_id, text in records[half:]:
                with profiled(profilers["check"]):
                    store.check(text)
                with profiled(profilers["add"]):
                    store.add(external_id, text)
            if timeline.last_add is not None:  # for EXPLAIN to add that document again
                store.delete(timeline.last_add[1]["external_id"])
    finally:
        for target, name, fn in listeners:
            event.remove(target, name, fn)
    print_segments(timeline, half)
    print_frames(profilers, len(records) - half)
    if timeline.last_add is not None:
        print(
            "\n== EXPLAIN (ANALYZE, BUFFERS) of an add statement (that document deleted "
            "first), generic plan, third run, rolled back =="
        )
        plan = explain(url, *timeline.last_add).splitlines()
        print("\n".join(plan_summary(plan)))


@contextlib.contextmanager
def profiled(profiler: Any) -> Iterator[None]:
    """Run the block under ``profiler`` (its sessions add up)."""
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()


class WaitSampler(threading.Thread):
    """Samples, every ``interval`` seconds, what the clients' server connections are doing.

    The clients connect with ``application_name`` :data:`CLIENT_APP`; each sample counts their
    connections by state and wait event (``pg_stat_activity``).
    """

    def __init__(self, url: str, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.counts: dict[str, int] = {}
        self.samples = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        """Sample until :meth:`stop`."""
        query = (
            "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
            "WHERE application_name = %s"
        )
        with psycopg.connect(conninfo(self.url), autocommit=True) as conn:
            while not self.stopping.wait(self.interval):
                for state, kind, name in conn.execute(query, [CLIENT_APP]):
                    key = wait_label(state, kind, name)
                    self.counts[key] = self.counts.get(key, 0) + 1
                self.samples += 1

    def stop(self) -> dict[str, float]:
        """Stop sampling; returns the mean number of connections in each state."""
        self.stopping.set()
        self.join()
        return {
            k: v / max(1, self.samples)
            for k, v in sorted(self.counts.items(), key=lambda item: -item[1])
        }


def wait_label(state: str | None, kind: str | None, name: str | None) -> str:
    """A reader's name for a client connection's state and wait event."""
    if state == "active" and (kind, name) == ("Lock", "advisory"):
        return "waiting for a writers' lock (the store's, a key's, a cluster's)"
    if state == "active" and kind is None:
        return "running a statement"
    if state == "active" and kind == "IO" and name and name.startswith("WAL"):
        return f"writing WAL ({name}, COMMIT)"
    if state == "idle in transaction":
        return "in a transaction, waiting for its client"
    if state == "idle":
        return "idle (between calls, or a client's other pooled connection)"
    return f"{state} {kind}:{name}"


def with_application_name(url: str) -> str:
    """``url`` with ``application_name`` :data:`CLIENT_APP`."""
    return f"{url}{'&' if '?' in url else '?'}application_name={CLIENT_APP}"
