"""The embedded PostgreSQL server: start, attach, stop, and recovery after kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa

from dedup_store.db.server import embedded, tuning
from dedup_store.errors import DatabaseError

ATTACH_SCRIPT = """
from dedup_store.db.server import embedded
url = embedded.start()
print(url)
print(embedded.status().pid)
"""


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private data directory; whatever server runs in it is stopped afterwards."""
    path = tmp_path / "data"
    monkeypatch.setenv(embedded.ENV_DATA_DIR, str(path))
    yield path
    embedded.stop()


def select_one(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("select 1")).scalar_one())
    finally:
        engine.dispose()


def run_attach(data_dir: Path) -> tuple[str, int]:
    """Start-or-attach in a separate Python process; return its URL and the server pid."""
    env = {**os.environ, embedded.ENV_DATA_DIR: str(data_dir)}
    out = subprocess.run(
        [sys.executable, "-c", ATTACH_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    url, pid = out.stdout.split()
    return url, int(pid)


def test_status_before_start(data_dir: Path) -> None:
    state = embedded.status()
    assert state.running is False
    assert state.pid is None
    assert state.url is None
    assert state.initialized is False
    assert state.data_dir == data_dir
    assert embedded.stop() is False


def test_start_connect_attach_stop(data_dir: Path) -> None:
    url = embedded.start()
    assert url.startswith("postgresql+psycopg://postgres@/postgres?host=")
    assert select_one(url) == 1
    state = embedded.status()
    assert state.running and state.initialized and state.url == url
    assert psutil.Process(state.pid).name().startswith("postgres")
    assert (data_dir / "pgdata" / "PG_VERSION").exists()

    other_url, other_pid = run_attach(data_dir)
    assert (other_url, other_pid) == (url, state.pid)
    assert embedded.start() == url

    assert embedded.stop() is True
    assert embedded.status().running is False
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    assert embedded.stop() is False


def test_server_is_sized_for_the_machine_and_bulk_loads(data_dir: Path) -> None:
    url = embedded.start()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            show = {
                name: conn.execute(sa.text(f"SHOW {name}")).scalar_one()
                for name in ("wal_level", "max_wal_size", "checkpoint_timeout", "shared_buffers")
            }
    finally:
        engine.dispose()
    assert show["wal_level"] == "minimal"  # a bulk load into a new store skips the WAL
    assert show["max_wal_size"] == "8GB" and show["checkpoint_timeout"] == "30min"
    memory, _cores = tuning.machine()
    expected = next(s for s in tuning.server_settings(memory, 1) if s.name == "shared_buffers")
    assert show["shared_buffers"] == expected.value
    assert (data_dir / "pgdata" / tuning.CONF_NAME).exists()


def test_server_outlives_the_process_that_started_it(data_dir: Path) -> None:
    url, pid = run_attach(data_dir)
    state = embedded.status()
    assert state.running and state.pid == pid
    assert select_one(url) == 1


def test_recovers_after_postmaster_is_killed(data_dir: Path) -> None:
    embedded.start()
    old_pid = embedded.status().pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    wait_until(lambda: not embedded.status().running)
    assert (data_dir / "pgdata" / "postmaster.pid").exists()

    url = embedded.start()
    assert select_one(url) == 1
    new_pid = embedded.status().pid
    assert new_pid is not None and new_pid != old_pid


def test_recovers_from_pid_file_naming_another_process(data_dir: Path) -> None:
    embedded.start()
    assert embedded.stop() is True
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    # a stale lock file whose pid was reused by an unrelated live process (this one)
    pid_file.write_text(f"{os.getpid()}\n{data_dir / 'pgdata'}\n0\n5432\n\n\n\nready\n")
    assert embedded.status().running is False

    assert select_one(embedded.start()) == 1
    assert embedded.status().pid != os.getpid()


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(embedded.ENV_DATA_DIR, raising=False)
    key = embedded.installation_key()
    assert embedded.data_dir().name == f"install-{key}"
    if os.geteuid() == 0:
        assert embedded.data_dir().parent == Path("/var/lib/dedup_store")
    else:
        assert embedded.data_dir().parent.name == "dedup_store"
        assert Path.home() in embedded.data_dir().parents
    assert embedded.pgdata_dir() == embedded.data_dir() / "pgdata"


def test_data_dir_is_per_installation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(embedded.ENV_DATA_DIR, raising=False)
    ours = embedded.data_dir()
    assert (embedded.installation_dir() / "pginstall").is_dir()
    monkeypatch.setattr(embedded, "installation_dir", lambda: tmp_path / "other-venv")
    theirs = embedded.data_dir()
    assert theirs != ours and theirs.parent == ours.parent
    monkeypatch.setenv(embedded.ENV_DATA_DIR, str(tmp_path / "shared"))
    assert embedded.data_dir() == tmp_path / "shared"


def test_refuses_a_server_of_another_installation(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = embedded.start()
    pid = embedded.status().pid
    assert pid is not None
    server_exe = Path(psutil.Process(pid).exe()).resolve()
    assert embedded.installation_dir() in server_exe.parents
    # another installation (its binaries elsewhere) sharing this DEDUP_STORE_DATA_DIR
    monkeypatch.setattr(embedded, "installation_dir", lambda: tmp_path / "other-venv")
    with pytest.raises(DatabaseError, match="not this installation's server") as info:
        embedded.start()
    assert str(server_exe) in str(info.value)
    monkeypatch.undo()
    monkeypatch.setenv(embedded.ENV_DATA_DIR, str(data_dir))
    assert embedded.start() == url


@pytest.mark.parametrize("path", ["/root/x", "/home/someone/.local/share/dedup_store", "/home"])
def test_root_refuses_home_directories(path: str) -> None:
    with pytest.raises(DatabaseError, match="home directory"):
        embedded.check_data_dir(Path(path), is_root=True)
    embedded.check_data_dir(Path(path), is_root=False)


def test_root_accepts_system_directories() -> None:
    embedded.check_data_dir(Path("/var/lib/dedup_store"), is_root=True)
    embedded.check_data_dir(Path("/tmp/dedup_store"), is_root=True)


def test_unwritable_data_dir_is_a_database_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(embedded.ENV_DATA_DIR, str(blocker / "data"))
    with pytest.raises(DatabaseError, match="cannot create the embedded database directory"):
        embedded.start()


def wait_until(condition: object, timeout_s: float = 10.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)
