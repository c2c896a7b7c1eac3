"""``claim_next`` and ``claim_many`` through the unit of work: batch after batch of ready
candidates read from the scheduling index and chosen from inside the transaction that
holds them (:class:`~feltdb.work.claiming.CandidateChoice`), each batch one commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial

from feltdb.auth.grants import Grant
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Commit, StorageConflict
from feltdb.work import inputs
from feltdb.work.claimed import ClaimedWork, Claims
from feltdb.work.claiming import CandidateChoice
from feltdb.work.revocations import grant_in_force
from feltdb.work.states import WorkloadState
from feltdb.work.unit import UnitOfWork

CANDIDATE_BATCH = 32
"""Candidates a claim reads per index query once it has met one it cannot take (until
then it reads only as many as it wants)."""


def claim_work(
    unit: UnitOfWork,
    tenant_id: str,
    application_id: str,
    worker: str,
    capabilities: Iterable[str],
    limit: int,
    *,
    now: int,
    lease_ms: int,
    max_lease_ms: int,
    definitions: Iterable[str] | None,
    environments: Iterable[str] | None,
    start: bool,
    under: Grant | None = None,
) -> Claims:
    """Claim up to ``limit`` of the application's ready work for ``worker``, holding
    ``capabilities``, under leases of ``lease_ms`` (at most ``max_lease_ms``), of the
    ``definitions`` and ``environments`` given (``None``: any); each also started when
    ``start``; ``under`` (a grant) checked again before it looks and inside each
    transaction that claims (:func:`~feltdb.work.revocations.grant_in_force`: its refusal
    claims nothing). See ``WorkloadStore.claim_work``.
    """
    guard = None if under is None else partial(grant_in_force, under, now)
    if guard is not None:
        # Also before: a claim that finds no work opens no transaction, and must not
        # answer "none" under a grant that may no longer ask.
        guard(unit.db.get_row)
    choice = CandidateChoice(
        worker=inputs.actor(worker, "worker"),
        held=inputs.capabilities(capabilities),
        lease_ms=inputs.lease(lease_ms, "lease_ms", max_lease_ms),
        now=now,
        definitions=_optional_set(definitions, "definitions"),
        environments=_optional_set(environments, "environments"),
        wanted=inputs.integer(limit, "limit", 1, inputs.MAX_BATCH_ITEMS),
        start=bool(start),
        guard=guard,
    )
    return claim_up_to(unit, tenant_id, application_id, choice)


def _optional_set(values: Iterable[str] | None, field: str) -> frozenset[str] | None:
    return None if values is None else frozenset(inputs.identifiers(values, field))


def claim_up_to(
    unit: UnitOfWork, tenant_id: str, application_id: str, choice: CandidateChoice
) -> Claims:
    """Claim up to ``choice.wanted`` of the application's ready work, batch after batch
    of candidates from the scheduling index, each batch one transaction.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    choice.bind(unit.db, (tenant_id, application_id))
    wanted, offset = choice.wanted, 0
    granted = Claims()
    # Only as many candidates as it may take are read (and, on PostgreSQL, locked) until
    # a read finds one it cannot take; from then on, pages of CANDIDATE_BATCH.
    paging = False
    while len(granted) < wanted:
        choice.wanted = wanted - len(granted)
        choice.reset()
        page = max(CANDIDATE_BATCH, choice.wanted) if paging else choice.wanted
        # An aged read starts below the top: a short one is not the end of the ready work.
        aged = choice.aging_s is not None
        outcomes = unit.db.commit_selected_many(
            DURABLE_WORK_COLLECTION,
            tenant_id,
            application_id,
            WorkloadState.READY.value,
            choice.now,
            choice.choose,
            limit=page,
            offset=offset,
            # Only the ranges of work this worker may take are read: a worker never
            # pages through a backlog of another definition, or of work needing a
            # capability or an environment it lacks. (choose still checks each.)
            partitions=choice.partitions(),
        )
        progressed = _committed(unit, choice, outcomes, granted)
        if progressed and (paging or choice.deferred or len(choice.chosen) == choice.examined):
            continue  # what was chosen left the ready set: look again from here
        if choice.examined < page and not aged:
            break
        if not paging:
            paging = True  # something here it cannot take: read on in pages, from the top
            continue
        if choice.turned:
            # Rows read in turns have no one position to page past (and a row set aside,
            # or a key passed over, shifts the turns): read on in claim order, from the top.
            choice.fair, offset, choice.after = False, 0, None
            continue
        # A whole batch this worker cannot run: page past it, from where it ended (never
        # reading it again, as an offset would, every row before it, page after page).
        # Where an offset is read (too many groups to walk), the rows set aside have left
        # the selection: counting them would skip as many rows nobody has looked at.
        offset += choice.examined - choice.aside
        choice.after = choice.last
    granted.next_start_s = choice.next_start_s
    return granted


def _committed(
    unit: UnitOfWork,
    choice: CandidateChoice,
    outcomes: Sequence[Commit | StorageConflict],
    granted: Claims,
) -> bool:
    """Whether any of ``choice``'s chosen commits committed (``outcomes``); each that did
    is remembered and told, and each claim it granted added to ``granted``.
    """
    progressed = False
    for (loaded, operation, claim, plan), outcome in zip(choice.chosen, outcomes, strict=True):
        if isinstance(outcome, StorageConflict):
            # Its row is held while chosen: only a dependency it read can have been
            # written meanwhile, and the work is left for a later claim.
            continue
        progressed = True
        unit.remember(plan, loaded.workload, loaded.version + 1)
        unit.notify(operation, loaded, loaded.workload)
        if claim is not None:
            granted.append(ClaimedWork(claim, loaded.workload))
    return progressed
