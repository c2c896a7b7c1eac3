"""Concurrency limits: work naming a concurrency key holds at most its limit of live claims
at once, decided in the claim's own commit.

A workload may name a ``concurrency_key`` (a customer, an account, an external API) and a
``concurrency_limit``. Each key of a tenant's application has one row in
:data:`SLOTS_COLLECTION`: the workloads that took a slot, each with the claim it took it
with. A claim of such work reads that row inside its transaction, counts the holders
whose own row still holds that claim (in a held state: claimed, running, checkpointed,
cancellation requested), and claims only while they are fewer than the limit, writing
the row again, with itself added and the released holders gone, in the claim's own
commit, guarded by the version read. So every claim of a key commits a new version of one
row: two claims of one key, in two processes or on two servers, cannot both commit on
the same count, and neither overshoots the limit.

Nothing else writes the row: a slot is free once its holder's row no longer holds the
claim (completed, failed, its cancellation confirmed, recovered after its lease expired,
timed out), which the next claim of the key sees. Work whose lease expired holds its slot
until recovery releases it, as it holds its claim.

A claim that finds its key at its limit takes other work (:mod:`feltdb.work.claiming`); a
claim by id is refused ``WORKLOAD_NOT_READY``. The claim groups of limited work carry its
key (:func:`feltdb.work.partitions.claim_group`), so a claim can pass over a key at its
limit without reading its backlog (:class:`Saturation`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from feltdb.errors import WorkloadError
from feltdb.fields import MAX_CONCURRENCY_LIMIT
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, RowReader, StoredRow
from feltdb.work.recovery import RECOVERABLE_STATES

__all__ = [
    "DEFINITION_KEY_PREFIX",
    "SATURATION",
    "SLOTS_COLLECTION",
    "Saturation",
    "SlotRows",
    "SlotTaken",
    "at_limit",
    "holders_of",
    "live_holders",
    "slot_key",
    "take_slot",
]

SLOTS_COLLECTION: Final = "system_concurrency_slots"
DEFINITION_KEY_PREFIX: Final = "definition:"
"""The concurrency key a definition's default limit gives its work (this, then its id:
:mod:`feltdb.work.concurrency_defaults`); no requester may name one."""
HELD: Final = frozenset(state.value for state in RECOVERABLE_STATES)
"""The states in which work holds its claim: claimed, running, checkpointed, and
cancellation requested (its worker still holds the claim until it confirms)."""


def slot_key(tenant_id: str, application_id: str, key: str) -> str:
    """The slot row's key of ``key`` in a tenant's application (each part length-prefixed:
    names may hold any character).
    """
    return f"{len(tenant_id)}:{tenant_id}/{len(application_id)}:{application_id}/{key}"


@dataclass(frozen=True, slots=True)
class SlotTaken:
    """A slot taken: the row to write in the claim's commit, and its guard."""

    mutation: Mutation
    guard: Precondition
    holders: dict[str, str]
    """The holders written (workload id: claim id), the taker among them."""


def holders_of(row: StoredRow | None) -> dict[str, str]:
    """The holders a slot row names (none for no row, or one not of this shape)."""
    holders = row.document.get("holders") if row is not None else None
    if not isinstance(holders, dict):
        return {}
    return {str(k): v for k, v in holders.items() if isinstance(v, str)}


def live_holders(
    holders: Mapping[str, str], rows: Mapping[str, StoredRow | None]
) -> dict[str, str]:
    """Those of ``holders`` whose row (``rows``, by workload id) still holds the claim they
    took their slot with.
    """
    return {
        workload_id: claim_id
        for workload_id, claim_id in holders.items()
        if _holds(rows.get(workload_id), claim_id)
    }


def _holds(row: StoredRow | None, claim_id: str) -> bool:
    if row is None or row.document.get("state") not in HELD:
        return False
    claim = row.document.get("current_claim")
    return isinstance(claim, dict) and claim.get("claim_id") == claim_id


SlotRows = set[str]
"""The slot rows (their keys) one transaction writes."""


def take_slot(
    workload: Workload, claim_id: str, read: RowReader, taken: SlotRows
) -> SlotTaken | None:
    """A slot of ``workload``'s key for its claim ``claim_id``, read with ``read`` inside the
    claiming transaction; ``None`` when its live holders are already at its limit, or when
    this transaction already takes a slot of that key (``taken``, updated here).

    One slot of a key per transaction: a second would be guarded by the version the first
    writes, and if the first's commit were lost to another transaction's write of that
    same version, the second's guard would hold on a row it never read. The claim loop
    takes the next in its next transaction; so it does past :data:`MAX_SLOTS_PER_TRANSACTION`.
    """
    assert workload.concurrency_key is not None and workload.concurrency_limit is not None
    key = slot_key(workload.tenant_id, workload.application_id, workload.concurrency_key)
    if key in taken or len(taken) >= MAX_SLOTS_PER_TRANSACTION:
        return None
    row = read(SLOTS_COLLECTION, key)
    holders = holders_of(row)
    rows = {holder: read(DURABLE_WORK_COLLECTION, holder) for holder in holders}
    holders = live_holders(holders, rows)
    holders.pop(workload.workload_id, None)
    if len(holders) >= workload.concurrency_limit:
        return None
    taken.add(key)
    holders[workload.workload_id] = claim_id
    document: dict[str, Any] = {
        "key": workload.concurrency_key,
        "limit": workload.concurrency_limit,
        "holders": holders,
    }
    guard = (
        Precondition(SLOTS_COLLECTION, key, require_absent=True)
        if row is None
        else Precondition(SLOTS_COLLECTION, key, expected_version=row.version)
    )
    # Indexed by its tenant's application, so that its keys are listed (limits_view).
    index = RowIndex(tenant_id=workload.tenant_id, application_id=workload.application_id)
    return SlotTaken(Mutation(SLOTS_COLLECTION, key, document, index), guard, holders)


SATURATION_MEMORY: Final = 4096
"""The most keys a process remembers finding at their limit."""
SATURATION_FRESH_S: Final = 0.25
"""How long a key found full is passed over without reading it again: a claim's check of
a suspected key costs two reads, paid at most four times a second per key per process."""
MAX_SLOTS_PER_TRANSACTION: Final = 32
"""Slots one claiming transaction takes at most: each is a plan of two guards, written
under a savepoint, and PostgreSQL's snapshots overflow past 64 subtransactions."""


class Saturation:
    """Keys a claim found at their limit lately, so that later claims check them before
    reading their backlog (a key never found full costs nothing). Bounded, oldest out.
    """

    def __init__(self) -> None:
        self._full: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, key: str) -> None:
        """Remember ``key`` (a :func:`slot_key`) as found at its limit."""
        with self._lock:
            self._full[key] = time.monotonic()
            self._full.move_to_end(key)
            while len(self._full) > SATURATION_MEMORY:
                self._full.popitem(last=False)

    def suspected(self, key: str) -> bool:
        """Whether ``key`` was found at its limit and not found free since."""
        with self._lock:
            return key in self._full

    def fresh(self, key: str) -> bool:
        """Whether ``key`` was found at its limit within :data:`SATURATION_FRESH_S`: passed
        over again without a read (a slot freed meanwhile waits that long at most).
        """
        with self._lock:
            noted = self._full.get(key)
        return noted is not None and time.monotonic() - noted < SATURATION_FRESH_S

    def forget(self, key: str) -> None:
        """``key`` was found below its limit."""
        with self._lock:
            self._full.pop(key, None)


SATURATION: Final = Saturation()
"""The keys this process's claims found at their limit lately."""


def released(workload: Workload) -> None:
    """``workload``, of a concurrency key, was committed in this process: if in a state that
    holds no claim, its key's slot may be free, and is read again at the next claim (a
    release in another process is seen within :data:`SATURATION_FRESH_S`).
    """
    if workload.concurrency_key is not None and workload.state.value not in HELD:
        key = slot_key(workload.tenant_id, workload.application_id, workload.concurrency_key)
        SATURATION.forget(key)


def at_limit(db: Database, key: str, limit: int) -> bool:
    """Whether ``key``'s live holders, as committed now (outside any transaction: a hint),
    are at ``limit``; found full within :data:`SATURATION_FRESH_S`, without a read. A read
    that fails says no: the choice decides on the rows it holds.
    """
    if SATURATION.fresh(key):
        return True
    try:
        holders = holders_of(db.get_row(SLOTS_COLLECTION, key))
        if len(holders) < limit:
            return False
        rows = db.get_rows(DURABLE_WORK_COLLECTION, list(holders)[:MAX_CONCURRENCY_LIMIT])
    except WorkloadError:
        return False
    full = len(live_holders(holders, rows)) >= limit
    if full:
        SATURATION.note(key)
    return full
