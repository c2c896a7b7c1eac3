"""pgqueuer draining N no-op jobs: one ``QueueManager`` per process, ``mode=drain``.

Driver: asyncpg. Schema: ``Queries.install()`` with pgqueuer's default durability
(``durable``: every table LOGGED). The server runs ``synchronous_commit=on``. Left at its
defaults, pgqueuer dequeues in batches (``batch_size=10``) and buffers its completion log
(``pgqueuer_log``) before writing it in batches: that is the peer as shipped.
"""

from __future__ import annotations

import asyncio

import asyncpg
from harness import child
from pgqueuer import AsyncpgDriver, Queries, QueueManager
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.models import Job

from peers.cli import main

CHUNK = 1000


async def _prepare(url: str, n: int) -> None:
    connection = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(connection))
        await queries.install()
        for first in range(0, n, CHUNK):
            size = min(CHUNK, n - first)
            await queries.enqueue(
                ["noop"] * size, [str(first + i).encode() for i in range(size)], [0] * size
            )
    finally:
        await connection.close()


async def _work(url: str) -> None:
    connection = await asyncpg.connect(url)
    manager = QueueManager(Queries(AsyncpgDriver(connection)))
    done = 0

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        nonlocal done
        done += 1

    at_go = await asyncio.to_thread(child.wait_for_go)
    await manager.run(mode=QueueExecutionMode.drain)
    child.report(done, at_go)
    await connection.close()


async def _count(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        left = await connection.fetchval("select count(*) from pgqueuer")
        finished = await connection.fetchval(
            "select count(*) from pgqueuer_log where status = 'successful'"
        )
        return int(finished) if left == 0 else -int(left)
    finally:
        await connection.close()


def prepare(url: str, n: int) -> None:
    asyncio.run(_prepare(url, n))


def work(url: str, index: int) -> None:
    asyncio.run(_work(url))


def count(url: str) -> int:
    return asyncio.run(_count(url))


if __name__ == "__main__":
    main(prepare, work, count, __doc__)
