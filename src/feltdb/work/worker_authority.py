"""A worker's claims and batches as one caller's :class:`~feltdb.work.authority.Authority`
makes them: what it may claim (its grant's capabilities and constraints, narrowed by what
the worker asks), and each batch item authorized as the single call is, refused alone.

The API's worker routes and the local client both call these, so what a worker may take
and report is decided in one place for both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from feltdb.auth.policy import ClaimFilter, claim_filter
from feltdb.errors import WorkloadError
from feltdb.records.workload import WorkloadClaim, WorkloadResult
from feltdb.work.authority import Authority
from feltdb.work.batches import Completion, Heartbeat, per_item
from feltdb.work.claimed import Claims, LeaseRenewal


class Fenced(Protocol):
    """What every report of a worker names (a batch body's item, or a client's)."""

    @property
    def workload_id(self) -> str:
        """The workload reported on."""

    @property
    def claim_id(self) -> str:
        """The claim it is reported under."""

    @property
    def fencing_token(self) -> int:
        """The claim's fencing token."""


class CompletionFields(Fenced, Protocol):
    """What a completion item holds besides: the result."""

    @property
    def result_id(self) -> str:
        """The result's id."""

    @property
    def output(self) -> Any:
        """The output."""

    @property
    def artifacts(self) -> Iterable[str]:
        """The artifacts' paths."""

    @property
    def schema_version(self) -> int:
        """The output's schema version."""


class HeartbeatFields(Fenced, Protocol):
    """What a heartbeat item holds besides: how far to extend the lease."""

    @property
    def extend_ms(self) -> int:
        """The extension asked for, in milliseconds."""


def claim_choice(
    acting: Authority,
    capabilities: Iterable[str] | None,
    definitions: Iterable[str] | None,
    holds: frozenset[str] | None = None,
) -> ClaimFilter:
    """What ``acting``'s worker may claim, narrowed to the ``capabilities`` and
    ``definitions`` it asks for (``None``: all it may). A caller with a grant may claim
    only with ``workload:claim`` on its whole application, holding at most the grant's
    capabilities, within its constraints; the holder of the store holds ``holds`` (``None``:
    whatever it asks), within its scope.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a grant that may not claim.
    """
    if acting.grant is not None and acting.checked:
        return claim_filter(acting.grant, capabilities, definitions)
    if holds is None:
        held = frozenset(capabilities or ())
    else:
        held = holds if capabilities is None else holds & frozenset(capabilities)
    served = acting.scope.definitions or None
    if definitions is not None:
        served = frozenset(definitions) if served is None else served & frozenset(definitions)
    return ClaimFilter(held, served, acting.scope.environments or None)


def claim_next(
    acting: Authority, eligible: ClaimFilter, *, now: int | None, lease_ms: int
) -> WorkloadClaim | None:
    """Claim the next of the caller's work that ``eligible`` admits (``None``: none), as
    :func:`claim_work` claims.
    """
    claimed = claim_work(acting, eligible, 1, now=now, lease_ms=lease_ms, start=False)
    return claimed[0].claim if claimed else None


def claim_work(
    acting: Authority,
    eligible: ClaimFilter,
    limit: int,
    *,
    now: int | None,
    lease_ms: int,
    start: bool,
) -> Claims:
    """Claim up to ``limit`` of the caller's work that ``eligible`` admits, each with its
    workload (started, with ``start``). A caller's grant is checked again where the claim
    commits, so a long-poll opened before a revocation or the grant's expiry claims nothing.
    """
    scope = acting.scope
    return acting.store.claim_work(
        scope.tenant_id, scope.application_id, acting.worker, eligible.capabilities, limit,
        now, lease_ms, definitions=eligible.definitions, environments=eligible.environments,
        start=start, under=acting.grant if acting.checked else None,
    )  # fmt: skip


def complete_each(
    acting: Authority, items: Sequence[CompletionFields], now: int | None
) -> list[WorkloadResult | WorkloadError]:
    """Each item's completion, authorized as the single call is (refused alone), all the
    authorized ones committed in one transaction.
    """

    def prepared(i: CompletionFields, worker: str) -> Completion:
        return Completion(
            i.workload_id, i.claim_id, worker, i.fencing_token, i.result_id, i.output,
            i.artifacts, i.schema_version,
        )  # fmt: skip

    run = functools.partial(acting.store.complete_many, now=now, scope=acting.scope)
    return _each(acting, items, prepared, run)


def renew_each(
    acting: Authority, items: Sequence[HeartbeatFields], now: int | None
) -> list[LeaseRenewal | WorkloadError]:
    """Each item's heartbeat, authorized as the single call is (refused alone), all the
    authorized ones committed in one transaction.
    """

    def prepared(i: HeartbeatFields, worker: str) -> Heartbeat:
        return Heartbeat(i.workload_id, i.claim_id, worker, i.fencing_token, i.extend_ms)

    run = functools.partial(acting.store.renew_leases, now=now, scope=acting.scope)
    return _each(acting, items, prepared, run)


Item = TypeVar("Item", bound=Fenced)
Prepared = TypeVar("Prepared")
Answer = TypeVar("Answer")


def _each(
    acting: Authority,
    items: Sequence[Item],
    make: Callable[[Item, str], Prepared],
    run: Callable[[list[Prepared]], Sequence[Answer | WorkloadError]],
) -> list[Answer | WorkloadError]:
    """``make`` each item as the worker the caller is on its workload (an item the caller
    may not report on is refused alone), and ``run`` the made ones in one call.
    """
    return per_item(items, lambda item: make(item, acting.worker_on(item.workload_id)), run)
