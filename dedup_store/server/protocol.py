"""uvicorn's HTTP protocol (httptools) with an answer sent in one write.

uvicorn writes an answer's status line and headers as soon as the application sends them, and
its body when that comes: two writes to the socket, two system calls and two segments for the
client to read, for an answer that the application sends whole in one step of the event loop.
Here the writes of one step are joined and sent at the end of it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HttpProtocol(HttpToolsProtocol):
    """The httptools protocol whose connections write once per step of the event loop."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take the connection, its writes joined (:class:`JoinedWrites`)."""
        super().connection_made(JoinedWrites(transport, self.loop))  # type: ignore[arg-type]


class JoinedWrites:
    """A transport whose writes of one step of the event loop are sent as one, when the step
    ends (or before it is closed); anything else is the transport's own.

    Args:
        transport: the connection's transport.
        loop: its event loop.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Send ``data`` with the other writes of this step, at its end."""
        if not self._pending:
            self._loop.call_soon(self._send)
        self._pending.append(data)

    def close(self) -> None:
        """Send what is waiting, then close."""
        self._send()
        self._transport.close()

    def _send(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending = []
        if not self._transport.is_closing():
            self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
