"""feltdb: a durable workload authority.

The public surface is exactly the names of ``API.md``; everything else is internal.
"""

# Errors
# Authorization
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
from feltdb.errors import WorkloadError

# Storage
from feltdb.storage import CommittedTransaction
from feltdb.storage.targets import open_database

# The authority
from feltdb.work.batches import Completion, Heartbeat
from feltdb.work.deadlines import deadline_breach
from feltdb.work.models import (
    DEADLINE_CONTRACT_VERSION,
    DURABLE_WORK_COLLECTION,
    WORKLOAD_CONTRACT_VERSION,
    ApprovalDecision,
    ApprovalPolicy,
    CreateWorkload,
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
from feltdb.work.states import ApprovalOutcome, AttemptStatus, BackoffPolicy, WorkloadState
from feltdb.work.store import WorkloadStore
from feltdb.work.transitions import can_transition

__version__ = "0.1.0"

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
    "Grant",
    "GrantConstraints",
    "GrantSigner",
    "GrantStatus",
    "Heartbeat",
    "ResourceScope",
    "ResourceScopeKind",
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
