"""Test handlers with the real runtime on a real, throwaway store.

:class:`WorkerTestEnvironment` opens an embedded SQLite store in a temporary directory,
admits work as a test requester, and runs a :class:`~feltdb.worker.Worker` on it until
nothing is claimable: claim, start, heartbeat, checkpoint, complete or fail, exactly as in
production (there is no in-memory imitation of the store to drift from it). Assert on
what was committed::

    from feltdb.testing import WorkerTestEnvironment
    from tasks import worker          # your Worker and its handlers

    def test_send_email():
        with WorkerTestEnvironment() as env:
            sent = env.submit("send-email", {"to": "ada@example.com"})
            env.run(worker)
            assert env.get(sent.workload_id).result.output == {"sent": 1}
            assert env.states(sent.workload_id)[-1] == "SUCCEEDED"

The worker runs through a :class:`~feltdb.client.LocalClient` of the environment's store
(as ``worker:NAME``, on the environment's clock); its own url, token or store are left as
they are. :meth:`WorkerTestEnvironment.client` gives one for any subject.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from feltdb.auth import GrantSigner, Subject
from feltdb.auth.policy import SUBMIT, application_grant
from feltdb.auth.scope import Scope
from feltdb.client.local import LocalClient
from feltdb.client.protocol import given_fields
from feltdb.records.workload import ApprovalPolicy, Workload, WorkloadRetryPolicy, WorkloadTimeouts
from feltdb.work.states import WorkloadState
from feltdb.work.store import WorkloadStore
from feltdb.worker import Worker
from feltdb.worker.runtime import MAINTENANCE_INTERVAL_S

REQUESTER = Subject.service("feltdb-testing")
"""Who submits the environment's work."""


class WorkerTestEnvironment:
    """A temporary store for one test, its work, and runs of workers on it.

    Args:
        tenant: the tenant the work is admitted to (workers run in it).
        application: likewise the application.
    """

    def __init__(self, *, tenant: str = "test", application: str = "test") -> None:
        self.tenant = tenant
        self.application = application
        self.now = int(time.time())
        """The environment's clock (unix seconds): every store call of its runs uses it,
        and :meth:`run` moves it forward to run retries to their end."""
        self.directory = Path(tempfile.mkdtemp(prefix="feltdb-testing-"))
        """Where the store's file lives; deleted by :meth:`close`."""
        self.store = WorkloadStore.open(self.directory / "work.db")
        self.scope = Scope(tenant, application)
        """Where the environment's work is admitted and its workers claim."""
        self._signer = GrantSigner("testing", secrets.token_bytes(32))

    def close(self) -> None:
        """Close the store and delete it."""
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> WorkerTestEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def client(self, subject: Subject, *, grant: bool = False) -> LocalClient:
        """A :class:`~feltdb.client.LocalClient` of ``subject`` on this environment's store,
        in its tenant's application, on its clock (:attr:`now`); with ``grant``, holding a
        grant to submit, signed now (a submission keeps it).
        """
        signed = None
        if grant:
            signed = self._signer.sign(
                application_grant(
                    subject,
                    self.tenant,
                    self.application,
                    {SUBMIT},
                    issued_at=self.now - 60,
                    expires_at=self.now + 3600,
                )
            )
        return LocalClient(self.store, self.scope, subject, clock=lambda: self.now, grant=signed)

    def submit(
        self,
        definition_id: str,
        input: Any = None,
        *,
        capabilities: Iterable[str] = (),
        key: str | None = None,
        priority: int = 0,
        retry_policy: WorkloadRetryPolicy | None = None,
        timeouts: WorkloadTimeouts | None = None,
        approval: ApprovalPolicy | None = None,
        not_before: int | None = None,
    ) -> Workload:
        """Admit work of ``definition_id`` with ``input`` (as a test service), claimable
        now unless ``not_before`` or ``approval`` say otherwise.
        """
        fields: dict[str, Any] = {
            "environment": "test",
            "definition_id": definition_id,
            "definition_revision": "test",
            "trigger": "test",
            "input": input,
            "capability_snapshot": list(capabilities),
            "idempotency_key": key if key is not None else uuid.uuid4().hex,
            "priority": priority,
            "retry_policy": retry_policy,
            "timeouts": timeouts,
            "approval": approval,
            "not_before": not_before,
        }
        workload, _ = self.client(REQUESTER, grant=True).submit(given_fields(fields))
        return workload

    def run(self, worker: Worker, *, retries: bool = True) -> int:
        """Run ``worker`` on this environment's store until nothing is claimable and
        nothing runs; how many attempts ran.

        With ``retries`` (the default), work the retry policy re-armed for later is run too:
        when nothing is claimable now, the environment's clock (:attr:`now`) moves to the
        earliest instant such work becomes eligible, and the worker runs again, until no
        work waits for a retry. The backoff is honoured, only not waited for in real time.
        ``retries=False`` runs what is claimable now and stops.
        """
        client = LocalClient(
            self.store,
            self.scope,
            Subject.worker(worker.name),
            clock=lambda: self.now,
            maintenance_interval_s=MAINTENANCE_INTERVAL_S,
        )
        ran = worker.drain(client=client)
        while retries:
            due = self._next_retry_at(worker)
            if due is None:
                break
            self.now = max(self.now, due)
            ran += worker.drain(client=client)
        return ran

    def _next_retry_at(self, worker: Worker) -> int | None:
        """The earliest instant READY work of a definition ``worker`` serves becomes
        eligible, if it is later than now (work not yet due: a retry's backoff, a
        ``not_before``); ``None`` when there is none.
        """
        waiting = [
            w.next_attempt_at
            for w in self.store.list(self.tenant, self.application)
            if w.state is WorkloadState.READY
            and w.definition_id in worker.handlers
            and w.next_attempt_at is not None
            and w.next_attempt_at > self.now
        ]
        return min(waiting) if waiting else None

    def get(self, workload: str | Workload) -> Workload:
        """The committed workload (named by its id, or by the workload :meth:`submit`
        answered).
        """
        return self.store.get(_id_of(workload))

    def states(self, workload: str | Workload) -> list[str]:
        """The states the workload went through, in order, from its committed history."""
        history = self.store.get(_id_of(workload)).execution_history
        return [event.to.value for event in history]


def _id_of(workload: str | Workload) -> str:
    return workload if isinstance(workload, str) else workload.workload_id
