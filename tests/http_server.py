"""The real ``dedup-store serve`` in a subprocess, for the HTTP tests, and a TCP proxy to the
database that a test can cut (the database "down" for the server, not for anyone else)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

READY_SECONDS = 60


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``dedup-store --db-url URL --schema SCHEMA serve --port PORT OPTIONS`` in a subprocess.

    Its standard error (JSON lines) goes to ``log``.
    """

    def __init__(
        self,
        url: str,
        schema: str,
        log: Path,
        *options: str,
        token: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.token = token
        environment = {**os.environ, **(env or {})}
        environment.pop("DEDUP_STORE_TOKEN", None)
        if token is not None:
            environment["DEDUP_STORE_TOKEN"] = token
        command = [
            sys.executable,
            "-m",
            "dedup_store",
            "--db-url",
            url,
            "--schema",
            schema,
            "serve",
            "--port",
            str(self.port),
            *options,
        ]
        self._err = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=self._err, env=environment
        )

    def wait_ready(self) -> Server:
        """Wait until ``/readyz`` answers 200 (fails the test if the server exits first)."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the server exited ({self.process.returncode}): {self.text()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        raise AssertionError(f"the server did not become ready: {self.text()}")

    def client(self, token: str | None = None, **options: Any) -> httpx.Client:
        """A keep-alive client; with the server's token unless another is given."""
        chosen = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {chosen}"} if chosen else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60, **options)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the process; returns its exit code (0 for an exit by the
        SIGTERM sent, which uvicorn raises again once it has stopped gracefully)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=90)
        finally:
            self._err.close()
        return 0 if code == -signal.SIGTERM else code

    def text(self) -> str:
        """What the server wrote on standard error."""
        if not self._err.closed:
            self._err.flush()
        return self.log.read_text(encoding="utf-8", errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        """Its standard error, one JSON object a line."""
        return [json.loads(line) for line in self.text().splitlines() if line.strip()]


class TcpProxy:
    """Forwards connections from a loopback port to ``target``; :meth:`cut` closes every
    connection and refuses new ones until :meth:`restore`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        """Accept connections (again)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close the listener and every connection through it."""
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
