"""HTTP at the wire: an ASGI app served by uvicorn on a real port, and raw requests (a declared
length that is never sent, a chunked body that never ends) that no ordinary client would send."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import uvicorn

__all__ = ["RawAnswer", "exchange", "serving"]


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """The app on a real HTTP port of this event loop; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass(frozen=True)
class RawAnswer:
    """A response as read off the connection."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


async def exchange(url: str, head: list[str], body: Iterable[bytes] = ()) -> RawAnswer:
    """Send the request line and headers ``head`` and then ``body`` exactly as given on one
    connection, and read the answer until the server closes the connection."""
    where = urlsplit(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for chunk in body:
            writer.write(chunk)
            await writer.drain()
        data = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return RawAnswer(int(status_line.split()[1]), headers, rest)
