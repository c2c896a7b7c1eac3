"""Where the operator commands send their calls: a server, or a store opened directly.

Every command of :mod:`feltdb.cli_ops` is written once against :class:`Target`.
:class:`ServerTarget` calls a feltdb server with :class:`~feltdb.client.Client` (the
identity is the token's); :class:`StoreTarget` opens the store itself and acts as a local
operator: a subject (``human:$USER`` by default) holding a grant of every capability on
one tenant's application, signed by the keyring beside the store file, so what it commits
carries an authorization snapshot a server on the same store verifies.
"""

from __future__ import annotations

import builtins
import getpass
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from feltdb.auth import (
    Keyring,
    SignedGrant,
    Subject,
)
from feltdb.auth.policy import application_grant
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import CommittedTransaction
from feltdb.work.models import (
    ApprovalDecision,
    ApprovalPolicy,
    CreateWorkload,
    Workload,
    WorkloadRetryPolicy,
    WorkloadTimeouts,
)
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.store import WorkloadStore

if TYPE_CHECKING:
    from feltdb.client import Page

MAX_PAGE = 500
"""The largest page a server answers; lists longer than this are read a page at a time."""

C = TypeVar("C")


@dataclass(frozen=True)
class Submission:
    """What ``feltdb submit`` asks for: :class:`~feltdb.work.models.CreateWorkload`'s
    fields but those the target supplies (tenant, application, requester, grant, clock).
    """

    environment: str
    definition_id: str
    definition_revision: str
    trigger: str
    input: Any
    idempotency_key: str
    capability_snapshot: frozenset[str] = frozenset()
    priority: int = 0
    not_before: int | None = None
    retry_policy: WorkloadRetryPolicy | None = None
    timeouts: WorkloadTimeouts | None = None
    approval: ApprovalPolicy | None = None


class Target(Protocol):
    """The operations the operator commands need, answered by a server or a store alike.

    Every method raises :class:`~feltdb.errors.WorkloadError` (a
    :class:`~feltdb.client.ClientError` from a server) for a refusal.
    """

    def admit(self, submission: Submission) -> tuple[Workload, bool]:
        """Admit work; ``True`` when this call created it (``False``: an idempotent replay)."""
        ...

    def get(self, workload_id: str) -> Workload:
        """The committed workload."""
        ...

    def list(
        self, *, state: WorkloadState | None, definition: str | None, limit: int
    ) -> builtins.list[Workload]:
        """Up to ``limit`` workloads in list order (priority descending, then oldest first),
        following cursors as needed.
        """
        ...

    def approvals(self, limit: int) -> builtins.list[Workload]:
        """Up to ``limit`` workloads awaiting an approval decision, in list order."""
        ...

    def dead_letters(self, limit: int) -> builtins.list[Workload]:
        """Up to ``limit`` dead-lettered workloads, in list order."""
        ...

    def cancel(self, workload_id: str) -> WorkloadState:
        """Cancel (or request cancellation of) the workload; the state it is now in."""
        ...

    def retry(self, workload_id: str, reason: str | None) -> Workload:
        """Re-arm failed or dead-lettered work; the workload as re-armed."""
        ...

    def decide(
        self, workload_id: str, outcome: ApprovalOutcome, reason: str | None, input_hash: str
    ) -> tuple[ApprovalDecision, bool]:
        """Approve or reject, bound to ``input_hash``; ``True`` when it replays a decision."""
        ...

    def audit(self, after: int, limit: int) -> tuple[builtins.list[CommittedTransaction], int]:
        """Committed transactions after revision ``after`` and the revision to go on after."""
        ...

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a grant of this tenant and application; whether this call revoked it."""
        ...

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """The grants revoked in this tenant and application, oldest first."""
        ...

    def close(self) -> None:
        """Release connections (and the store, if this target opened it)."""
        ...


def collect(
    fetch: Callable[[C | None, int], tuple[builtins.list[Workload], C | None]], limit: int
) -> builtins.list[Workload]:
    """Up to ``limit`` workloads from the pages ``fetch(cursor, page_limit)`` answers,
    following each page's cursor until it is ``None`` or enough are found. A page may hold
    fewer than asked for (a filtered page), so the cursor, not the count, ends the walk.
    """
    found: builtins.list[Workload] = []
    cursor: C | None = None
    while len(found) < limit:
        items, cursor = fetch(cursor, min(limit - len(found), MAX_PAGE))
        found.extend(items)
        if cursor is None:
            break
    return found[:limit]


class ServerTarget:
    """A feltdb server at ``url``, called with the bearer ``token``."""

    def __init__(self, url: str, token: str) -> None:
        """Talk to ``url`` as the grant ``token`` carries (nothing is sent yet)."""
        # Imported here: httpx is a tenth of a second to import, which a command on a store
        # file never needs.
        from feltdb.client import Client

        self.client = Client(url, token)

    def admit(self, submission: Submission) -> tuple[Workload, bool]:
        """See :meth:`Target.admit`."""
        s = submission
        return self.client.admit(
            environment=s.environment,
            definition_id=s.definition_id,
            definition_revision=s.definition_revision,
            trigger=s.trigger,
            input=s.input,
            capability_snapshot=s.capability_snapshot,
            idempotency_key=s.idempotency_key,
            priority=s.priority,
            not_before=s.not_before,
            retry_policy=s.retry_policy,
            timeouts=s.timeouts,
            approval=s.approval,
        )

    def get(self, workload_id: str) -> Workload:
        """See :meth:`Target.get`."""
        return self.client.get(workload_id)

    def list(
        self, *, state: WorkloadState | None, definition: str | None, limit: int
    ) -> builtins.list[Workload]:
        """See :meth:`Target.list`."""
        return self._collect(
            lambda cursor, size: self.client.list(
                state=state, definition=definition, limit=size, cursor=cursor
            ),
            limit,
        )

    def approvals(self, limit: int) -> builtins.list[Workload]:
        """See :meth:`Target.approvals` (``GET /v1/approvals``: needs ``workload:approve``)."""
        return self._collect(
            lambda cursor, size: self.client.approvals(limit=size, cursor=cursor), limit
        )

    def dead_letters(self, limit: int) -> builtins.list[Workload]:
        """See :meth:`Target.dead_letters` (``GET /v1/dead-letters``: needs
        ``workload:operate``).
        """
        return self._collect(
            lambda cursor, size: self.client.dead_letters(limit=size, cursor=cursor), limit
        )

    @staticmethod
    def _collect(read: Callable[[str | None, int], Page], limit: int) -> builtins.list[Workload]:
        """:func:`collect` over the client's pages, ``read(cursor, size)``."""

        def fetch(cursor: str | None, size: int) -> tuple[builtins.list[Workload], str | None]:
            page = read(cursor, size)
            return page.items, page.next_cursor

        return collect(fetch, limit)

    def cancel(self, workload_id: str) -> WorkloadState:
        """See :meth:`Target.cancel`."""
        return self.client.cancel(workload_id)

    def retry(self, workload_id: str, reason: str | None) -> Workload:
        """See :meth:`Target.retry`."""
        return self.client.retry(workload_id, reason)

    def decide(
        self, workload_id: str, outcome: ApprovalOutcome, reason: str | None, input_hash: str
    ) -> tuple[ApprovalDecision, bool]:
        """See :meth:`Target.decide`; the decider is the token's subject."""
        return self.client.decide(workload_id, outcome, reason, input_hash)

    def audit(self, after: int, limit: int) -> tuple[builtins.list[CommittedTransaction], int]:
        """See :meth:`Target.audit`."""
        page = self.client.audit(after=after, limit=limit)
        return page.items, page.next_after

    def revoke_grant(self, grant_id: str) -> bool:
        """See :meth:`Target.revoke_grant`."""
        return self.client.revoke_grant(grant_id)

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`Target.revocations`."""
        return self.client.revocations()

    def close(self) -> None:
        """See :meth:`Target.close`."""
        self.client.close()


@dataclass
class StoreTarget:
    """A store opened directly, acted on by ``subject`` under ``grant`` in one tenant's
    application. Build it with :func:`open_store_target`.
    """

    store: WorkloadStore
    tenant_id: str
    application_id: str
    subject: Subject
    grant: SignedGrant | None
    """The operator's grant, for what records one (a submission's snapshot, a decision's
    grant id); ``None`` for a command that records none, which so never touches a keyring."""
    clock: Callable[[], int] = field(default=lambda: int(time.time()))

    def _grant(self) -> SignedGrant:
        if self.grant is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED, "this command was opened without a grant"
            )
        return self.grant

    @property
    def actor(self) -> str:
        """The actor recorded for operator transitions, as a server records a token's."""
        return str(self.subject)

    def admit(self, submission: Submission) -> tuple[Workload, bool]:
        """See :meth:`Target.admit`."""
        s = submission
        fields: dict[str, Any] = {
            "tenant_id": self.tenant_id,
            "application_id": self.application_id,
            "environment": s.environment,
            "definition_id": s.definition_id,
            "definition_revision": s.definition_revision,
            "trigger": s.trigger,
            "input": s.input,
            "requested_by": self.subject,
            "authorization_snapshot": self._grant(),
            "capability_snapshot": s.capability_snapshot,
            "priority": s.priority,
            "idempotency_key": s.idempotency_key,
            "not_before": s.not_before,
            "created_at": self.clock(),
            "approval": s.approval,
        }
        # Only what was given: CreateWorkload's own defaults stand for the rest.
        if s.retry_policy is not None:
            fields["retry_policy"] = s.retry_policy
        if s.timeouts is not None:
            fields["timeouts"] = s.timeouts
        return self.store.admit(CreateWorkload(**fields))

    def get(self, workload_id: str) -> Workload:
        """See :meth:`Target.get`. Work of another tenant or application is not found, as
        a server answers it.
        """
        workload = self.store.get(workload_id)
        if (workload.tenant_id, workload.application_id) != (self.tenant_id, self.application_id):
            raise WorkloadError(ErrorCode.WORKLOAD_NOT_FOUND, f"no workload {workload_id}")
        return workload

    def list(
        self, *, state: WorkloadState | None, definition: str | None, limit: int
    ) -> builtins.list[Workload]:
        """See :meth:`Target.list`."""

        def fetch(cursor: Any, size: int) -> tuple[builtins.list[Workload], Any]:
            return self.store.page(
                self.tenant_id,
                self.application_id,
                state=state,
                definition=definition,
                after=cursor,
                limit=size,
            )

        return collect(fetch, limit)

    def approvals(self, limit: int) -> builtins.list[Workload]:
        """See :meth:`Target.approvals`."""
        return self.list(state=WorkloadState.AWAITING_APPROVAL, definition=None, limit=limit)

    def dead_letters(self, limit: int) -> builtins.list[Workload]:
        """See :meth:`Target.dead_letters`."""
        return self.list(state=WorkloadState.DEAD_LETTER, definition=None, limit=limit)

    def cancel(self, workload_id: str) -> WorkloadState:
        """See :meth:`Target.cancel`."""
        self.get(workload_id)
        return self.store.cancel(workload_id, self.actor, self.clock())

    def retry(self, workload_id: str, reason: str | None) -> Workload:
        """See :meth:`Target.retry`."""
        self.get(workload_id)
        self.store.retry(workload_id, self.actor, self.clock(), reason)
        return self.store.get(workload_id)

    def decide(
        self, workload_id: str, outcome: ApprovalOutcome, reason: str | None, input_hash: str
    ) -> tuple[ApprovalDecision, bool]:
        """See :meth:`Target.decide`; the decider is this target's subject."""
        self.get(workload_id)
        return self.store.decide(
            workload_id,
            self.subject,
            outcome,
            reason,
            self._grant().grant.id,
            input_hash,
            self.clock(),
        )

    def audit(self, after: int, limit: int) -> tuple[builtins.list[CommittedTransaction], int]:
        """See :meth:`Target.audit`."""
        return self.store.audit_after(self.tenant_id, self.application_id, after, limit)

    def revoke_grant(self, grant_id: str) -> bool:
        """See :meth:`Target.revoke_grant`."""
        return self.store.revoke_grant(
            grant_id,
            self.actor,
            self.clock(),
            tenant_id=self.tenant_id,
            application_id=self.application_id,
        )

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`Target.revocations`."""
        return self.store.revocations(self.tenant_id, self.application_id)

    def close(self) -> None:
        """See :meth:`Target.close`."""
        self.store.close()


def local_operator() -> Subject:
    """The person running the command: ``human:`` and the login name."""
    return Subject.human(getpass.getuser())


def operator_keyring(db: str, now: int) -> Keyring:
    """The keyring a server on ``db`` would use: ``FELTDB_KEYRING`` when set, else the
    file beside the store (created when missing, as ``feltdb serve`` would create it).
    """
    # Imported here: the server package (FastAPI) is slow to import, and only --db needs it.
    from feltdb.server.app import KEYRING_ENV, default_keyring_path, load_or_create_keyring

    from_env = os.environ.get(KEYRING_ENV)
    if from_env:
        return Keyring.from_json(from_env)
    return load_or_create_keyring(default_keyring_path(db), now)[0]


OPERATOR_GRANT_LIFETIME_S = 300
"""How long the grant of a ``--db`` operator lasts: one command's worth (five minutes)."""


def operator_grant(
    keyring: Keyring,
    subject: Subject,
    tenant_id: str,
    application_id: str,
    now: int,
    capabilities: Iterable[str],
) -> SignedGrant:
    """The grant a ``--db`` operator acts under: ``capabilities`` (what the command does)
    on ``application_id``'s workloads, to ``subject``, issued by itself, for
    :data:`OPERATOR_GRANT_LIFETIME_S`, signed with ``keyring`` as evidence (the
    ``authorization_snapshot`` of what it submits): never a token.
    """
    grant = application_grant(
        subject,
        tenant_id,
        application_id,
        capabilities,
        issued_at=now,
        expires_at=now + OPERATOR_GRANT_LIFETIME_S,
    )
    return keyring.evidence(grant)


def open_store_target(
    db: str,
    tenant_id: str,
    application_id: str,
    subject: Subject | None = None,
    *,
    capabilities: Iterable[str] = (),
    records: bool = False,
) -> StoreTarget:
    """Open the store at ``db`` (a file or URL) for a local operator, ``subject`` (default
    :func:`local_operator`) in ``tenant_id``'s ``application_id``, under a short grant of
    ``capabilities`` when it ``records`` one (a submission keeps it as its snapshot, a
    decision names it); a command that records none opens no keyring.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the store cannot be opened.
        OSError: when the keyring cannot be read or written.
    """
    who = subject if subject is not None else local_operator()
    now = int(time.time())
    grant = None
    if records:
        # Only a command that records its grant signs one: a read never creates a keyring
        # (a signing secret) beside the store (issue 10, point 11).
        keyring = operator_keyring(db, now)
        grant = operator_grant(keyring, who, tenant_id, application_id, now, capabilities)
    return StoreTarget(WorkloadStore.open(db), tenant_id, application_id, who, grant)
