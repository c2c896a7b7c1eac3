"""What a worker process needs from its surroundings: an authority to work for (its own
client, a store, or a server from its options or ``FELTDB_URL``/``FELTDB_TOKEN``, whose
token is kept: :mod:`feltdb.worker.tokens`), and SIGTERM/SIGINT to stop on.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from feltdb.auth import Subject
from feltdb.auth.policy import CLAIM, worker_name
from feltdb.auth.scope import Scope
from feltdb.auth.tokens import decode_token
from feltdb.client.local import LocalClient
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.heap import settle_heap
from feltdb.worker.tokens import TokenKeeper, read_token

if TYPE_CHECKING:
    from feltdb.worker.runtime import Worker

log = logging.getLogger("feltdb.worker")

URL_ENV = "FELTDB_URL"
TOKEN_ENV = "FELTDB_TOKEN"

MAINTENANCE_INTERVAL_S = 1.0
"""How often an embedded worker runs the authority's maintenance (deadlines, lost
leases), through its :class:`~feltdb.client.LocalClient`: with no server, somebody must, or
a dead worker's work would wait forever."""


def open_client(worker: Worker) -> tuple[WorkloadClient, bool, Callable[[], None]]:
    """The client ``worker`` works through (its own, one of its store, or one of a server),
    whether it was opened here (so the worker closes it), and what to call before each
    claim pass (for a server's, what keeps its token; else :func:`unkept`).

    Raises:
        WorkloadError: as :func:`server_client`.
    """
    if worker.client is not None:
        return worker.client, False, unkept
    if worker.store is not None:
        local = LocalClient(
            worker.store,
            Scope(worker.tenant, worker.application),
            Subject.worker(worker.name),
            clock=worker.clock,
            maintenance_interval_s=MAINTENANCE_INTERVAL_S,
        )
        return local, True, unkept
    server, keep = server_client(worker.url, worker.token, worker.capabilities, worker.token_file)
    return server, True, keep


def unkept() -> None:
    """What a client with no token to keep calls before each claim pass: nothing."""


def server_client(
    url: str | None,
    token: str | None,
    capabilities: Iterable[str] | None,
    token_file: str | os.PathLike[str] | None = None,
) -> tuple[WorkloadClient, Callable[[], None]]:
    """A :class:`~feltdb.client.Client` of the server at ``url`` (else ``FELTDB_URL``)
    with ``token`` (else the one ``token_file`` holds, else ``FELTDB_TOKEN``), for a worker
    declaring ``capabilities``; and what keeps its token, to call before each claim pass
    (:meth:`~feltdb.worker.tokens.TokenKeeper.tend`). Warns at once when the token expires.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` when there is no URL or no token, both a token
            and a token file, or a token file that cannot be read;
            ``WORKLOAD_UNAUTHORIZED`` for a token that is not one.
    """
    url = url or os.environ.get(URL_ENV)
    if token is not None and token_file is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, "give the worker a token or a token file, not both"
        )
    path = None if token_file is None else Path(token_file)
    token = read_token(path) if path is not None else token or os.environ.get(TOKEN_ENV)
    if not url or not token:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "the worker has no authority to work for: give a url and a token "
            f"(or set {URL_ENV} and {TOKEN_ENV}), or a store",
        )
    check_token(token, capabilities)
    from feltdb.client.http import Client  # httpx, only for a worker of a server

    client = Client(url, token)
    keeper = TokenKeeper(token, path, client.use_token)
    keeper.announce()
    return client, keeper.tend


def check_token(token: str, capabilities: Iterable[str] | None) -> None:
    """Warn of a token that cannot claim what its worker declares it can run."""
    grant = decode_token(token).grant
    name = worker_name(grant.subject)
    lacking = sorted(set(capabilities or ()) - grant.capabilities)
    if lacking:
        # The server narrows what a worker declares to what its grant holds, silently:
        # work requiring these would wait for another worker forever (issue 10, point 2).
        log.warning(
            "worker %s declares capabilities its token does not hold: %s; work that "
            "requires them is never claimed by this worker",
            name,
            ", ".join(lacking),
        )
    if CLAIM not in grant.capabilities:
        log.warning("the token of worker %s lacks %s: it can claim nothing", name, CLAIM)


def own_process(on_signal: Callable[[str], None]) -> Callable[[], None]:
    """Take the process over for a worker that runs until signalled: call
    ``on_signal(NAME)`` on SIGTERM and SIGINT, and settle the heap
    (:func:`feltdb.heap.settle_heap`); answer the function that puts the previous signal
    handlers back. Only from the main thread (elsewhere nothing is done).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    settle_heap()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handle(signum: int, frame: FrameType | None) -> None:
        on_signal(signal.Signals(signum).name)

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
