"""feltdb: a durable workload authority.

The public surface is exactly the names of the API contract (docs/api.md); everything else
is internal. Each name is imported when first used, so ``import feltdb`` (and the command
line's ``--version``) costs nothing of the authority it does not use.
"""

import typing as _typing

import feltdb.lazy as _lazy

if _typing.TYPE_CHECKING:
    from feltdb.auth import (
        Grant,
        GrantConstraints,
        GrantSigner,
        GrantStatus,
        ResourceScope,
        ResourceScopeKind,
        SignedGrant,
        Subject,
    )
    from feltdb.definitions import Definition
    from feltdb.errors import (
        WorkloadError,
    )
    from feltdb.records.workload import (
        DEADLINE_CONTRACT_VERSION,
        DURABLE_WORK_COLLECTION,
        WORKLOAD_CONTRACT_VERSION,
        ApprovalDecision,
        ApprovalPolicy,
        Workload,
        WorkloadApproval,
        WorkloadAttempt,
        WorkloadCheckpoint,
        WorkloadClaim,
        WorkloadDependency,
        WorkloadEvent,
        WorkloadExecutionContext,
        WorkloadResult,
        WorkloadRetryPolicy,
        WorkloadTimeouts,
    )
    from feltdb.storage import (
        CommittedTransaction,
    )
    from feltdb.storage.targets import (
        open_database,
    )
    from feltdb.work.batches import (
        Completion,
        Heartbeat,
    )
    from feltdb.work.deadlines import (
        deadline_breach,
    )
    from feltdb.work.models import CreateWorkload
    from feltdb.work.retention import RetentionPolicy
    from feltdb.work.states import (
        ApprovalOutcome,
        AttemptStatus,
        BackoffPolicy,
        WorkloadState,
    )
    from feltdb.work.store import (
        WorkloadStore,
    )
    from feltdb.work.transitions import (
        can_transition,
    )

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Grant": "feltdb.auth",
    "GrantConstraints": "feltdb.auth",
    "GrantSigner": "feltdb.auth",
    "GrantStatus": "feltdb.auth",
    "ResourceScope": "feltdb.auth",
    "ResourceScopeKind": "feltdb.auth",
    "SignedGrant": "feltdb.auth",
    "Subject": "feltdb.auth",
    "Definition": "feltdb.definitions",
    "WorkloadError": "feltdb.errors",
    "CommittedTransaction": "feltdb.storage",
    "open_database": "feltdb.storage.targets",
    "Completion": "feltdb.work.batches",
    "Heartbeat": "feltdb.work.batches",
    "deadline_breach": "feltdb.work.deadlines",
    "DEADLINE_CONTRACT_VERSION": "feltdb.records.workload",
    "DURABLE_WORK_COLLECTION": "feltdb.records.workload",
    "WORKLOAD_CONTRACT_VERSION": "feltdb.records.workload",
    "ApprovalDecision": "feltdb.records.workload",
    "ApprovalPolicy": "feltdb.records.workload",
    "CreateWorkload": "feltdb.work.models",
    "Workload": "feltdb.records.workload",
    "WorkloadApproval": "feltdb.records.workload",
    "WorkloadAttempt": "feltdb.records.workload",
    "WorkloadCheckpoint": "feltdb.records.workload",
    "WorkloadClaim": "feltdb.records.workload",
    "WorkloadDependency": "feltdb.records.workload",
    "WorkloadEvent": "feltdb.records.workload",
    "WorkloadExecutionContext": "feltdb.records.workload",
    "WorkloadResult": "feltdb.records.workload",
    "WorkloadRetryPolicy": "feltdb.records.workload",
    "WorkloadTimeouts": "feltdb.records.workload",
    "RetentionPolicy": "feltdb.work.retention",
    "ApprovalOutcome": "feltdb.work.states",
    "AttemptStatus": "feltdb.work.states",
    "BackoffPolicy": "feltdb.work.states",
    "WorkloadState": "feltdb.work.states",
    "WorkloadStore": "feltdb.work.store",
    "can_transition": "feltdb.work.transitions",
}
"""Where each public name is defined."""

__all__ = [
    "DEADLINE_CONTRACT_VERSION",
    "DURABLE_WORK_COLLECTION",
    "WORKLOAD_CONTRACT_VERSION",
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "AttemptStatus",
    "BackoffPolicy",
    "CommittedTransaction",
    "Completion",
    "CreateWorkload",
    "Definition",
    "Grant",
    "GrantConstraints",
    "GrantSigner",
    "GrantStatus",
    "Heartbeat",
    "ResourceScope",
    "ResourceScopeKind",
    "RetentionPolicy",
    "SignedGrant",
    "Subject",
    "Workload",
    "WorkloadApproval",
    "WorkloadAttempt",
    "WorkloadCheckpoint",
    "WorkloadClaim",
    "WorkloadDependency",
    "WorkloadError",
    "WorkloadEvent",
    "WorkloadExecutionContext",
    "WorkloadResult",
    "WorkloadRetryPolicy",
    "WorkloadState",
    "WorkloadStore",
    "WorkloadTimeouts",
    "can_transition",
    "deadline_breach",
    "open_database",
]


__getattr__, __dir__ = _lazy.exported(__name__, _EXPORTS, globals())
