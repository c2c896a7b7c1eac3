"""``feltdb serve``'s listening socket: its connections get TCP_NODELAY.

Without it every answer uvicorn writes in two parts (headers, then body) waits for the
client's delayed ACK, about 40 ms per keep-alive request (measured 46 ms, against under
5 ms with it). asyncio sets the option only on connections of a socket whose protocol is
named ``IPPROTO_TCP``; a socket made with protocol 0 (as ``socket.create_server`` makes
it) silently goes without.
"""

from __future__ import annotations

import asyncio
import socket

from feltdb.cli.serve import _listen


def test_connections_of_the_serve_socket_get_tcp_nodelay() -> None:
    listening = _listen("127.0.0.1", 0)
    port = listening.getsockname()[1]
    seen: list[int] = []

    async def run() -> None:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connection = writer.get_extra_info("socket")
            seen.append(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listening)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(run())
    assert listening.proto == socket.IPPROTO_TCP
    assert seen and seen[0] != 0


def test_an_ipv6_host_listens_on_ipv6_alone() -> None:
    # As socket.create_server did: "::" must not also take every IPv4 address.
    listening = _listen("::1", 0)
    assert listening.family == socket.AF_INET6 and listening.proto == socket.IPPROTO_TCP
    assert listening.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
    listening.close()
