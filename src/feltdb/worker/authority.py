"""The calls a worker makes, over a server (HTTP) or on a local store (embedded).

:class:`Authority` is what the runtime needs from the authority, worker-side: claim, start,
read the context and the held workload, heartbeat, checkpoint, complete, fail, confirm a
cancellation. :class:`ServerAuthority` translates to :class:`~feltdb.client.Client`
(the worker's identity is its token's subject), :class:`StoreAuthority` to a
:class:`~feltdb.work.store.WorkloadStore` (the worker names itself). Neither decides
anything: refusals come back as :class:`~feltdb.errors.WorkloadError` with the authority's
code, whichever way the call travelled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from feltdb.auth.policy import CLAIM, worker_name
from feltdb.auth.tokens import decode_token
from feltdb.work.models import (
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadResult,
)
from feltdb.work.states import WorkloadState
from feltdb.work.store import WorkloadStore

MAINTENANCE_INTERVAL_S = 1.0
"""How often an embedded worker runs the authority's maintenance (deadlines, lost
leases): with no server, somebody must, or a dead worker's work would wait forever."""


if TYPE_CHECKING:
    from feltdb.client import Client

log = logging.getLogger("feltdb.worker")


class Authority(Protocol):
    """The authority as a worker sees it. Every method may raise ``WorkloadError``."""

    worker_id: str
    """Who the authority knows this worker as (the fence's ``worker``)."""

    def claim_next(
        self, wait_s: float, lease_ms: int, definitions: Iterable[str]
    ) -> WorkloadClaim | None:
        """Claim the next workload of ``definitions`` (those this worker has handlers for)
        that it may run, waiting up to ``wait_s`` for one.
        """
        ...

    def get(self, workload_id: str) -> Workload:
        """The committed workload (a worker may read the work it holds)."""
        ...

    def start(self, claim: WorkloadClaim) -> None:
        """Start the claimed attempt."""
        ...

    def heartbeat(self, claim: WorkloadClaim, extend_ms: int) -> WorkloadClaim:
        """Extend the lease."""
        ...

    def checkpoint(self, claim: WorkloadClaim, state: Any) -> WorkloadCheckpoint:
        """Commit progress."""
        ...

    def complete(self, claim: WorkloadClaim, result_id: str, output: Any) -> WorkloadResult:
        """Record the result (the same ``result_id`` again replays it)."""
        ...

    def fail(self, claim: WorkloadClaim, kind: str, error: str, effect: str | None) -> None:
        """Report the attempt failed."""
        ...

    def confirm_cancel(self, claim: WorkloadClaim) -> None:
        """Confirm a requested cancellation."""
        ...

    def close(self) -> None:
        """Release what the adapter opened (not a store it was handed)."""
        ...


class ServerAuthority:
    """The authority behind a feltdb server, as the grant of ``token`` allows.

    The server names the worker by the grant's subject (``KIND:ID``, see
    :func:`~feltdb.auth.policy.worker_name`), so ``worker_id`` is read from the token;
    ``capabilities`` (when given) narrows the grant's for claiming.
    """

    def __init__(self, url: str, token: str, capabilities: Iterable[str] | None = None) -> None:
        from feltdb.client import Client  # httpx, only for a worker of a server

        self.client: Client = Client(url, token)
        grant = decode_token(token).grant
        self.worker_id = worker_name(grant.subject)
        self.capabilities = None if capabilities is None else sorted(capabilities)
        lacking = sorted(set(self.capabilities or ()) - grant.capabilities)
        if lacking:
            # The server narrows what a worker declares to what its grant holds, silently:
            # work requiring these would wait for another worker forever (issue 10, point 2).
            log.warning(
                "worker %s declares capabilities its token does not hold: %s; work that "
                "requires them is never claimed by this worker",
                self.worker_id,
                ", ".join(lacking),
            )
        if CLAIM not in grant.capabilities:
            log.warning(
                "the token of worker %s lacks %s: it can claim nothing", self.worker_id, CLAIM
            )

    def claim_next(
        self, wait_s: float, lease_ms: int, definitions: Iterable[str]
    ) -> WorkloadClaim | None:
        """As :meth:`Authority.claim_next`."""
        return self.client.claim_next(
            lease_ms=lease_ms,
            wait_ms=int(wait_s * 1000),
            capabilities=self.capabilities,
            definitions=definitions,
        )

    def get(self, workload_id: str) -> Workload:
        """As :meth:`Authority.get`."""
        return self.client.get(workload_id)

    def start(self, claim: WorkloadClaim) -> None:
        """As :meth:`Authority.start`."""
        self.client.start(claim.workload_id, claim.claim_id, claim.fencing_token)

    def heartbeat(self, claim: WorkloadClaim, extend_ms: int) -> WorkloadClaim:
        """As :meth:`Authority.heartbeat`."""
        return self.client.heartbeat(
            claim.workload_id, claim.claim_id, claim.fencing_token, extend_ms=extend_ms
        )

    def checkpoint(self, claim: WorkloadClaim, state: Any) -> WorkloadCheckpoint:
        """As :meth:`Authority.checkpoint`."""
        return self.client.checkpoint(claim.workload_id, claim.claim_id, claim.fencing_token, state)

    def complete(self, claim: WorkloadClaim, result_id: str, output: Any) -> WorkloadResult:
        """As :meth:`Authority.complete`."""
        return self.client.complete(
            claim.workload_id, claim.claim_id, claim.fencing_token, result_id, output
        )

    def fail(self, claim: WorkloadClaim, kind: str, error: str, effect: str | None) -> None:
        """As :meth:`Authority.fail`."""
        self.client.fail(
            claim.workload_id, claim.claim_id, claim.fencing_token, kind, error, effect=effect
        )

    def confirm_cancel(self, claim: WorkloadClaim) -> None:
        """As :meth:`Authority.confirm_cancel`."""
        self.client.confirm_cancel(claim.workload_id, claim.claim_id, claim.fencing_token)

    def close(self) -> None:
        """As :meth:`Authority.close`."""
        self.client.close()


class StoreAuthority:
    """The authority of a local store: this worker is ``worker_id`` in ``tenant_id``'s
    ``application_id``, holding ``capabilities``.

    With no server to run maintenance, :meth:`claim_next` also runs it (at most every
    :data:`MAINTENANCE_INTERVAL_S`): deadlines are enforced and lost leases recovered, so
    work of a worker that died comes back to this one.
    """

    POLL_S = 0.2
    """How often an embedded claim looks again while it waits for work."""

    def __init__(
        self,
        store: WorkloadStore,
        tenant_id: str,
        application_id: str,
        worker_id: str,
        capabilities: Iterable[str],
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.tenant_id = tenant_id
        self.application_id = application_id
        self.worker_id = worker_id
        self.capabilities = frozenset(capabilities)
        self.clock = clock
        """The unix-seconds clock of every store call; ``None``: the store's (the wall's).
        ``feltdb.testing`` gives one it can move forward, to run retries to their end."""
        self._maintained_at = float("-inf")

    def _now(self) -> int | None:
        return self.clock() if self.clock is not None else None

    def _maintain(self) -> None:
        if time.monotonic() - self._maintained_at >= MAINTENANCE_INTERVAL_S:
            self._maintained_at = time.monotonic()
            self.store.enforce_deadlines(self._now())
            self.store.recover_expired(self._now())

    def claim_next(
        self, wait_s: float, lease_ms: int, definitions: Iterable[str]
    ) -> WorkloadClaim | None:
        """As :meth:`Authority.claim_next`."""
        deadline = time.monotonic() + wait_s
        served = frozenset(definitions)
        while True:
            self._maintain()
            claim = self.store.claim_next(
                self.tenant_id,
                self.application_id,
                self.worker_id,
                self.capabilities,
                self._now(),
                lease_ms=lease_ms,
                definitions=served,
            )
            remaining = deadline - time.monotonic()
            if claim is not None or remaining <= 0:
                return claim
            time.sleep(min(self.POLL_S, remaining))

    def get(self, workload_id: str) -> Workload:
        """As :meth:`Authority.get`."""
        return self.store.get(workload_id)

    def start(self, claim: WorkloadClaim) -> None:
        """As :meth:`Authority.start`."""
        self.store.start(
            claim.workload_id, claim.claim_id, self.worker_id, claim.fencing_token, self._now()
        )

    def heartbeat(self, claim: WorkloadClaim, extend_ms: int) -> WorkloadClaim:
        """As :meth:`Authority.heartbeat`."""
        return self.store.heartbeat(
            claim.workload_id,
            claim.claim_id,
            self.worker_id,
            claim.fencing_token,
            self._now(),
            extend_ms=extend_ms,
        )

    def checkpoint(self, claim: WorkloadClaim, state: Any) -> WorkloadCheckpoint:
        """As :meth:`Authority.checkpoint`."""
        return self.store.checkpoint(
            claim.workload_id,
            claim.claim_id,
            self.worker_id,
            claim.fencing_token,
            state,
            self._now(),
        )

    def complete(self, claim: WorkloadClaim, result_id: str, output: Any) -> WorkloadResult:
        """As :meth:`Authority.complete`."""
        return self.store.complete(
            claim.workload_id,
            claim.claim_id,
            self.worker_id,
            claim.fencing_token,
            result_id,
            output,
            now=self._now(),
        )

    def fail(self, claim: WorkloadClaim, kind: str, error: str, effect: str | None) -> None:
        """As :meth:`Authority.fail`."""
        self.store.fail(
            claim.workload_id,
            claim.claim_id,
            self.worker_id,
            claim.fencing_token,
            kind,
            error,
            self._now(),
            effect=effect,
        )

    def confirm_cancel(self, claim: WorkloadClaim) -> None:
        """As :meth:`Authority.confirm_cancel`."""
        self.store.confirm_cancel(
            claim.workload_id, claim.claim_id, self.worker_id, claim.fencing_token, self._now()
        )

    def close(self) -> None:
        """Nothing to release: the store belongs to whoever opened it."""


def cancellation_requested(workload: Workload) -> bool:
    """Whether the authority asks the holder of ``workload`` to stop."""
    return workload.state is WorkloadState.CANCELLATION_REQUESTED
