"""What a worker is answered when it claims work or renews its leases: enough to run the
work and to learn it should stop, so that the runtime never reads the workload again.
"""

from __future__ import annotations

from dataclasses import dataclass

from feltdb.records.workload import Workload, WorkloadClaim
from feltdb.work.states import WorkloadState


@dataclass(frozen=True, slots=True)
class ClaimedWork:
    """A claim, and the workload as the claim's commit left it: its definition, input,
    checkpoints, timeouts and attempt count, the execution context a handler runs with.
    """

    claim: WorkloadClaim
    workload: Workload


class Claims(list[ClaimedWork]):
    """The work one claim call took, in order; and, when it found work held back by a rate
    limit, how long until such work may start (:mod:`feltdb.work.rate_limits`).
    """

    next_start_s: int | None = None
    """The fewest seconds until rate-limited work the claim passed over may start
    (``None``: it passed over none)."""


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """A heartbeat's answer: the extended claim, and whether an operator asked the holder
    to stop (the work is ``CANCELLATION_REQUESTED``: confirm once the handler stopped).
    """

    claim: WorkloadClaim
    cancellation_requested: bool

    @classmethod
    def of(cls, claim: WorkloadClaim, workload: Workload) -> LeaseRenewal:
        """The renewal of ``claim`` on ``workload`` as its heartbeat committed it."""
        requested = workload.state is WorkloadState.CANCELLATION_REQUESTED
        return cls(claim, requested)
