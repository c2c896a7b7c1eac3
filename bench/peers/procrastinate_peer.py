"""procrastinate draining N no-op jobs: one worker per process, ``run_worker_async(wait=False)``
(it returns once it has caught up with the queue), concurrency 1.

Connector: ``PsycopgConnector`` (psycopg 3). Schema: ``apply_schema_async()``. Finished
jobs stay in ``procrastinate_jobs`` with status ``succeeded`` (the default: no
``delete_jobs``). The server runs ``synchronous_commit=on``.
"""

from __future__ import annotations

import asyncio

import psycopg
from harness import child
from procrastinate import App, PsycopgConnector

from peers.cli import main

CHUNK = 1000
done = 0
"""Jobs this process ran."""


def make(url: str) -> tuple[App, object]:
    app = App(connector=PsycopgConnector(conninfo=url))

    @app.task(name="noop", queue="bench")
    async def noop(i: int) -> None:
        global done
        done += 1

    return app, noop


async def _prepare(url: str, n: int) -> None:
    app, noop = make(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for first in range(0, n, CHUNK):
            await noop.batch_defer_async(*({"i": i} for i in range(first, min(first + CHUNK, n))))  # type: ignore[attr-defined]


async def _work(url: str, index: int) -> None:
    app, _ = make(url)
    async with app.open_async():
        at_go = await asyncio.to_thread(child.wait_for_go)
        await app.run_worker_async(
            queues=["bench"],
            wait=False,
            concurrency=1,
            name=f"bench-{index}",
            install_signal_handlers=False,
        )
    child.report(done, at_go)


def prepare(url: str, n: int) -> None:
    asyncio.run(_prepare(url, n))


def work(url: str, index: int) -> None:
    asyncio.run(_work(url, index))


def count(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "select count(*) from procrastinate_jobs where status = 'succeeded'"
        ).fetchone()
    return int(row[0]) if row else 0


if __name__ == "__main__":
    main(prepare, work, count, __doc__)
