"""What the server writes and when: an answer in one write to its socket, access lines to
standard error in batches, everything else at once and in order.

The server as a client sees it, through these, is tested in ``tests/test_http*.py``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from dedup_store.server.logs import ACCESS, SERVER, BatchedStderrHandler, JsonFormatter
from dedup_store.server.protocol import JoinedWrites


class Socket(asyncio.Transport):
    """A transport that records what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000)}.get(name, default)


def test_the_head_and_body_of_an_answer_are_one_write() -> None:
    async def answer() -> tuple[list[bytes], list[bytes]]:
        socket = Socket()
        joined = JoinedWrites(socket, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        joined.write(b"{}")
        during = list(socket.written)
        await asyncio.sleep(0)
        return during, socket.written

    during, after = asyncio.run(answer())
    assert during == []
    assert after == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


def test_what_waits_is_sent_before_the_connection_closes() -> None:
    async def answer() -> Socket:
        socket = Socket()
        joined = JoinedWrites(socket, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
        joined.close()
        await asyncio.sleep(0)
        return socket

    socket = asyncio.run(answer())
    assert socket.written == [b"HTTP/1.1 500 Internal Server Error\r\n\r\n"]
    assert socket.closed


def test_everything_else_is_the_transports() -> None:
    async def peer() -> Any:
        return JoinedWrites(Socket(), asyncio.get_running_loop()).get_extra_info("peername")

    assert asyncio.run(peer()) == ("127.0.0.1", 5000)


def _record(name: str, message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.getLogger(name).makeRecord(name, level, "", 0, message, (), None)


@pytest.fixture
def handler() -> Any:
    made = BatchedStderrHandler(interval=0.2)
    made.setFormatter(JsonFormatter())
    yield made
    made.close()


def _messages(text: str) -> list[str]:
    return [json.loads(line)["message"] for line in text.splitlines()]


def test_access_lines_wait_for_their_batch(
    handler: BatchedStderrHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.handle(_record(ACCESS, "first"))
    handler.handle(_record(ACCESS, "second"))
    assert capsys.readouterr().err == ""
    deadline = time.monotonic() + 5
    written = ""
    while not written and time.monotonic() < deadline:
        time.sleep(0.05)
        written = capsys.readouterr().err
    assert _messages(written) == ["first", "second"]


def test_any_other_line_is_written_at_once_after_the_batch_before_it(
    handler: BatchedStderrHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.handle(_record(ACCESS, "request"))
    handler.handle(_record(SERVER, "stopped"))
    assert _messages(capsys.readouterr().err) == ["request", "stopped"]
    handler.handle(_record(ACCESS, "failed", logging.ERROR))
    assert _messages(capsys.readouterr().err) == ["failed"]


def test_a_batch_left_is_written_when_logging_shuts_down(
    handler: BatchedStderrHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.handle(_record(ACCESS, "last"))
    handler.close()
    assert _messages(capsys.readouterr().err) == ["last"]
