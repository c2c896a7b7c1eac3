"""What a worker process needs from its surroundings: a server to work for (from its
options or ``FELTDB_URL``/``FELTDB_TOKEN``), and SIGTERM/SIGINT to stop on.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

from feltdb.auth.policy import CLAIM, worker_name
from feltdb.auth.tokens import decode_token
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.heap import settle_heap

log = logging.getLogger("feltdb.worker")

URL_ENV = "FELTDB_URL"
TOKEN_ENV = "FELTDB_TOKEN"


def server_client(
    url: str | None, token: str | None, capabilities: Iterable[str] | None
) -> WorkloadClient:
    """A :class:`~feltdb.client.Client` of the server at ``url`` (else ``FELTDB_URL``)
    with ``token`` (else ``FELTDB_TOKEN``), for a worker declaring ``capabilities``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` when there is no URL or no token;
            ``WORKLOAD_UNAUTHORIZED`` for a token that is not one.
    """
    url = url or os.environ.get(URL_ENV)
    token = token or os.environ.get(TOKEN_ENV)
    if not url or not token:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "the worker has no authority to work for: give a url and a token "
            f"(or set {URL_ENV} and {TOKEN_ENV}), or a store",
        )
    check_token(token, capabilities)
    from feltdb.client.http import Client  # httpx, only for a worker of a server

    return Client(url, token)


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
