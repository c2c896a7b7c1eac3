"""A Hypothesis stateful model of the workload authority, on each backend.

A :class:`~hypothesis.stateful.RuleBasedStateMachine` drives the real ``WorkloadStore`` (an
SQLite file, or PostgreSQL) with random sequences of every operation: ``admit`` (new work,
an exact replay, a replay that differs), ``admit_many`` (with a repeated key, an item
depending on an earlier one, an invalid item), ``claim``, ``claim_next`` and ``claim_many``
(with and without ``start=True``, with and without routing by definition), ``start``,
``heartbeat`` and ``heartbeat_many``, ``execution_context``, ``checkpoint``, ``complete``
(with a fresh result id, a replayed report, a result id of other work) and
``complete_many``, ``fail`` (retryable and not, each failure effect), ``cancel``,
``confirm_cancel``, ``timeout``, ``retry``, ``decide`` (approve and reject, by a permitted
and a refused decider, with stale input), ``enforce_deadlines`` and ``recover_expired``.
Work has priorities, ``not_before``, dependencies on other work, approval requirements,
every kind of deadline, retry budgets of 0 to 3 attempts and capabilities only some of the
one to three workers hold. The clock (``now``, always passed explicitly) advances by small
steps and sometimes jumps far, past leases and deadlines. Workers use the claims they were
given, stale ones included, and forged ones (a token one too high, another worker).

Refusals (``WorkloadError``) are legal outcomes. Each operation's outcome, success or the
exact refusal code, is predicted from the workload as committed before the call, by rules
restated here from the reference (its deadline table, fence, claim gate, retry decisions,
cancellation and approval rules), not by calling the port's own code; so is which work the
scheduler claims, in which order, and which work each maintenance pass acts on. Every
refusal is checked to commit nothing, except a deadline found passed (``TIMED_OUT``) or a
spent budget (``ATTEMPTS_EXHAUSTED``), which commit that timeout or dead letter only.

After every step the store is read back (``store.list``, ``store.get`` and
``store.db.committed_transactions_after``) and these invariants are checked:

- every workload's history is a legal path of the transition table, restated here from the
  reference (so a wrong table in the port fails this test), with the event names of the
  reference, gap-free sequence numbers from 1, times that never go backwards, its last
  event's state the workload's state; a committed history only ever grows (an old history
  is a prefix of the new), and no transient state (``CREATED``, ``FAILED``, ``TIMED_OUT``,
  ``RECOVERING``) is ever committed;
- at most one succeeded attempt (and one ``SUCCEEDED`` event) per workload; a result exists
  exactly when the work succeeded, it is that of the holder of the fence its completion
  named (the claim the model remembers being accepted), and it never changes;
- a fenced call (start, heartbeat, checkpoint, complete, fail, confirmation) is accepted
  only from the holder of the current fence: a stale or forged claim is always refused;
- ``attempt_count`` never exceeds the budget (``max_attempts`` plus the operator re-arms the
  model made), and operator re-arms never exceed ``max_attempts``;
- fencing tokens strictly increase per workload across claims (1, 2, 3... in the claims the
  model was given and in the ``CLAIMED`` events), the current claim is always the latest one
  granted, and it exists exactly while a worker holds the work;
- nothing is claimed (by ``claim``, ``claim_next`` or ``claim_many``) before its eligibility
  instant or, unless an operator timed it out or re-armed it first, before its
  ``not_before``; nor before its approval; nor by a worker lacking its capabilities; nor, by
  the scheduler, with unmet dependencies;
- attempts, checkpoints and identities (workload, claim, lease, attempt, checkpoint ids) are
  as ``docs/api.md`` derives them; a closed attempt is never reopened; a committed approval
  decision never changes;
- every workload whose document changed was named by a logged transaction of that step.

The rules are grouped so that Hypothesis, which picks a rule uniformly, spends its steps
on work rather than on the clock: ``worker_call`` is any one fenced call, ``worker_batch``
either batch, ``operate`` an operator's cancel, timeout or re-arm, ``work`` a worker
making its held work progress, and ``advance`` moves the clock and may run maintenance.

Not covered here: concurrency (one writer, one thread; races between writers are other
suites'), crashes and restarts mid-operation (``test_kill_during_batches``), the HTTP
server and the worker SDK, grants, scopes and revocation, routing by ``environments``,
dependencies on states other than ``SUCCEEDED`` and ``CANCELLED``, two items of one batch
on one workload, legacy migration, ``page``, audit records' contents, secret rejection and
input validation beyond one invalid batch item (``test_admission_input_fuzz``),
pre-deadline (contract version 1) records, and wall-clock time (``now`` is always passed).
The predictions restate the reference, so where the port follows the reference in
something questionable, this test accepts it: an operator's ``timeout`` of ready work
that is not yet due re-arms it at ``now`` plus the initial retry delay, so work may then
be claimed before its ``not_before`` (the reference's ``timeout`` does the same).

Bounded in ``make test``; long in ``make soak`` (``support.soak``), whose figures record
how many examples (state machines run) and steps (rules run) there were.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from support.factories import SIGNER
from support.rows import set_aside_keys
from support.soak import record, scaled

from feltdb import (
    DURABLE_WORK_COLLECTION,
    ApprovalOutcome,
    ApprovalPolicy,
    AttemptStatus,
    BackoffPolicy,
    Completion,
    CreateWorkload,
    Grant,
    Heartbeat,
    ResourceScope,
    ResourceScopeKind,
    SignedGrant,
    Subject,
    Workload,
    WorkloadClaim,
    WorkloadDependency,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
)

S = WorkloadState

# --- the reference's rules, restated ------------------------------------------------------

LEGAL_EDGES: frozenset[tuple[WorkloadState, WorkloadState]] = frozenset(
    {
        # The reference's `legal(from, to)`, edge for edge, in its order.
        (S.CREATED, S.READY),
        (S.READY, S.CLAIMED),
        (S.CLAIMED, S.RUNNING),
        (S.RUNNING, S.CHECKPOINTED),
        (S.CHECKPOINTED, S.CHECKPOINTED),
        (S.RUNNING, S.SUCCEEDED),
        (S.CHECKPOINTED, S.SUCCEEDED),
        (S.CLAIMED, S.CANCELLATION_REQUESTED),
        (S.RUNNING, S.CANCELLATION_REQUESTED),
        (S.CHECKPOINTED, S.CANCELLATION_REQUESTED),
        (S.CANCELLATION_REQUESTED, S.CANCELLED),
        (S.READY, S.CANCELLED),
        (S.CREATED, S.CANCELLED),
        (S.FAILED, S.CANCELLED),
        (S.DEAD_LETTER, S.CANCELLED),
        (S.CLAIMED, S.FAILED),
        (S.RUNNING, S.FAILED),
        (S.CHECKPOINTED, S.FAILED),
        (S.CLAIMED, S.RECOVERING),
        (S.RUNNING, S.RECOVERING),
        (S.CHECKPOINTED, S.RECOVERING),
        (S.RECOVERING, S.READY),
        (S.FAILED, S.READY),
        (S.TIMED_OUT, S.READY),
        (S.DEAD_LETTER, S.READY),
        (S.FAILED, S.DEAD_LETTER),
        (S.RUNNING, S.TIMED_OUT),
        (S.CLAIMED, S.TIMED_OUT),
        (S.CHECKPOINTED, S.TIMED_OUT),
        (S.READY, S.TIMED_OUT),
        (S.TIMED_OUT, S.DEAD_LETTER),
        (S.RECOVERING, S.DEAD_LETTER),
        (S.READY, S.DEAD_LETTER),
        (S.CREATED, S.AWAITING_APPROVAL),
        (S.AWAITING_APPROVAL, S.READY),
        (S.AWAITING_APPROVAL, S.REJECTED),
        (S.AWAITING_APPROVAL, S.CANCELLED),
        (S.AWAITING_APPROVAL, S.TIMED_OUT),
        (S.TIMED_OUT, S.AWAITING_APPROVAL),
        (S.DEAD_LETTER, S.AWAITING_APPROVAL),
        (S.FAILED, S.AWAITING_APPROVAL),
    }
)
"""The reference's transition table (``legal`` in the reference), restated independently of
``feltdb.work.transitions`` so that a wrong table in the port fails this test."""

EVENT_NAMES: dict[WorkloadState, str] = {
    S.CREATED: "workload.created",
    S.READY: "workload.ready",
    S.CLAIMED: "workload.claimed",
    S.RUNNING: "workload.started",
    S.CHECKPOINTED: "workload.checkpointed",
    S.RECOVERING: "workload.recovered",
    S.CANCELLATION_REQUESTED: "workload.cancellation_requested",
    S.SUCCEEDED: "workload.completed",
    S.FAILED: "workload.failed",
    S.CANCELLED: "workload.cancelled",
    S.TIMED_OUT: "workload.timed_out",
    S.DEAD_LETTER: "workload.dead_lettered",
    S.AWAITING_APPROVAL: "workload.awaiting_approval",
    S.REJECTED: "workload.rejected",
}
"""The reference's ``event_name``."""

TRANSIENT = frozenset({S.CREATED, S.FAILED, S.TIMED_OUT, S.RECOVERING})
"""States a commit always moves on from (admission, the retry and recovery decisions)."""
TERMINAL = frozenset({S.SUCCEEDED, S.CANCELLED, S.REJECTED})
RESTING = TERMINAL | {S.DEAD_LETTER}
"""States work rests in: a dependency resting in another than its dependent awaits ended."""
HELD = frozenset({S.CLAIMED, S.RUNNING, S.CHECKPOINTED})
LEASED = HELD | {S.CANCELLATION_REQUESTED}
"""States in which a worker holds the work under a lease (an attempt is open)."""
RUNNING = frozenset({S.RUNNING, S.CHECKPOINTED})
DEADLINE_ACTIVE = frozenset({S.READY, S.CLAIMED, S.RUNNING, S.CHECKPOINTED, S.AWAITING_APPROVAL})
WORK_BOUNDING = frozenset({"overall", "queue", "approval"})
CANCEL_AT_ONCE = frozenset({S.READY, S.CREATED, S.AWAITING_APPROVAL, S.FAILED, S.DEAD_LETTER})
OPERATOR_RETRYABLE = frozenset({S.FAILED, S.DEAD_LETTER, S.TIMED_OUT})
OPEN_ATTEMPT = frozenset({AttemptStatus.CLAIMED, AttemptStatus.RUNNING, AttemptStatus.CHECKPOINTED})
SETTLING_REFUSALS = frozenset({"WORKLOAD_TIMED_OUT", "WORKLOAD_ATTEMPTS_EXHAUSTED"})
"""Refusals that commit something first: the timeout, or the dead letter, they report."""
STALE_REFUSALS = frozenset(
    {
        "WORKLOAD_CLAIM_INVALID",
        "WORKLOAD_STALE_FENCE",
        "WORKLOAD_TIMED_OUT",
        "WORKLOAD_RESULT_CONFLICT",
        "WORKLOAD_RESULT_DUPLICATE",
    }
)
"""What a call naming a claim that is not the current one may be answered."""


OUTCOMES: Counter[str] = Counter()
"""How often each outcome was seen in this process (for the summary printed with ``-s``)."""


def event(outcome: str) -> None:
    """Note an outcome: in Hypothesis's statistics, and in :data:`OUTCOMES`."""
    OUTCOMES[outcome] += 1
    hypothesis_event(outcome)


def deadline_seconds(ms: int) -> int:
    return -(-ms // 1000)


def entered_at(w: Workload, state: WorkloadState) -> int:
    """When ``w`` last entered ``state`` (its admission, if never)."""
    for entered in reversed(w.execution_history):
        if entered.to is state:
            return entered.at
    return w.created_at


def breach(w: Workload, now: int) -> tuple[str, int] | None:
    """The reference's ``deadline_breach``: the first deadline passed at ``now``."""
    if w.state not in DEADLINE_ACTIVE:
        return None
    t, claim = w.timeouts, w.current_claim
    candidates: list[tuple[str, int | None]] = [
        (
            "approval",
            entered_at(w, S.AWAITING_APPROVAL) + deadline_seconds(t.approval_ms)
            if t.approval_ms is not None and w.state is S.AWAITING_APPROVAL
            else None,
        ),
        (
            "overall",
            w.created_at + deadline_seconds(t.overall_ms) if t.overall_ms is not None else None,
        ),
        (
            "queue",
            max(
                entered_at(w, S.READY),
                w.next_attempt_at if w.next_attempt_at is not None else entered_at(w, S.READY),
            )
            + deadline_seconds(t.queue_ms)
            if t.queue_ms is not None and w.state is S.READY
            else None,
        ),
        (
            "claim",
            claim.claimed_at + deadline_seconds(t.claim_ms)
            if t.claim_ms is not None and w.state is S.CLAIMED and claim is not None
            else None,
        ),
        (
            "execution",
            w.attempts[-1].started_at + deadline_seconds(t.execution_ms)
            if t.execution_ms is not None
            and w.state in RUNNING
            and w.attempts
            and w.attempts[-1].started_at is not None
            else None,
        ),
        (
            "heartbeat",
            claim.last_heartbeat + deadline_seconds(t.heartbeat_ms)
            if t.heartbeat_ms is not None and claim is not None
            else None,
        ),
    ]
    for kind, at in candidates:
        if at is not None and now >= at:
            return kind, at
    return None


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def expected_workload_id(tenant: str, application: str, requester: Subject, key: str) -> str:
    scope = canonical([tenant, application, requester.kind.value, requester.id, key])
    return "workload_" + sha256(scope)[:24]


def expected_claim_id(workload_id: str, token: int, worker: str) -> str:
    return "claim_" + sha256(f"{workload_id}:{token}:{worker}")[:20]


# --- the model ------------------------------------------------------------------------------

APP = "app"
REQUESTER = Subject.agent("a1")
ADA = Subject.human("ada")  # may decide under the default (human-only) policy
SVC = Subject.service("svc")  # may not
WORKERS = ("w1", "w2", "w3")
CAPABILITIES = {
    "w1": frozenset({"email:send", "gpu"}),
    "w2": frozenset({"email:send"}),
    "w3": frozenset({"email:send"}),
}
MAX_LIVE = 4
"""Admission stops while this many workloads are neither finished nor dead-lettered..."""
MAX_WORKLOADS = 12
"""...or when there are this many in all."""
START = 1_000
RETRY_KINDS = ("timeout", "worker_failure", "transient_connection")
LEASES = st.sampled_from([2_000, 5_000, 30_000, 30_000])
WHICH = st.sampled_from(["held", "held", "held", "latest", "any"])
"""Which claim a worker call names: one that holds its work now (if any does), the latest of
some workload, or any the model was ever given."""
BATCH_WHICH = st.sampled_from(["running", "running", "held", "latest", "any"])
"""As :data:`WHICH`, or claims of running work (if any is), which a batch completes."""


@dataclass(frozen=True)
class Spec:
    """The knobs of one workload's admission."""

    priority: int
    definition: str
    gpu: bool
    not_before_in: int | None
    approval: bool
    max_attempts: int
    initial_delay_ms: int
    backoff: BackoffPolicy
    retry_on: frozenset[str]
    overall_ms: int | None
    queue_ms: int | None
    claim_ms: int | None
    execution_ms: int | None
    heartbeat_ms: int | None
    approval_ms: int | None
    dependencies: tuple[tuple[int, WorkloadState], ...]


def maybe(*values: int) -> st.SearchStrategy[int | None]:
    """Mostly ``None`` (no deadline), else one of ``values``."""
    return st.sampled_from([None, None, None, *values])


def _approval_wait(spec: Spec) -> Spec:
    """An approval deadline only for work that requires approval (admission refuses it
    otherwise)."""
    return spec if spec.approval else replace(spec, approval_ms=None)


specs: st.SearchStrategy[Spec] = st.builds(
    Spec,
    priority=st.sampled_from([0, 0, 1, 5]),
    definition=st.sampled_from(["send", "send", "sync"]),
    gpu=st.sampled_from([False, False, False, True]),
    not_before_in=st.sampled_from([None, None, None, 0, 3, 12, 45]),
    approval=st.sampled_from([False, False, False, True]),
    max_attempts=st.sampled_from([1, 2, 2, 3, 3, 3, 0]),
    initial_delay_ms=st.sampled_from([0, 1000, 3000]),
    backoff=st.sampled_from([BackoffPolicy.EXPONENTIAL, BackoffPolicy.FIXED]),
    retry_on=st.frozensets(st.sampled_from(RETRY_KINDS)),
    overall_ms=maybe(40_500, 150_000),
    queue_ms=maybe(14_500),
    claim_ms=maybe(4_000, 2_001),
    execution_ms=maybe(9_999),
    heartbeat_ms=maybe(1_500, 6_000),
    approval_ms=maybe(20_000, 7_500),
    dependencies=st.just(())
    | st.just(())
    | st.lists(
        st.tuples(st.integers(0, 63), st.sampled_from([S.SUCCEEDED, S.CANCELLED])),
        min_size=1,
        max_size=2,
    ).map(tuple),
).map(_approval_wait)
"""The knobs of an admission: a third of the work depends on other work, a quarter
requires approval, a quarter needs a capability one worker holds, most have no deadlines."""


@dataclass(frozen=True)
class Held:
    """A claim the model was given (or a forgery of one)."""

    workload_id: str
    claim_id: str
    worker: str
    fencing_token: int
    claimed_at: int


@dataclass
class Work:
    """What the model knows of one workload, from its own calls alone."""

    workload_id: str
    spec: Spec
    fields: dict[str, Any]
    """The admission request's fields (a replay rebuilds it from them)."""
    not_before: int | None
    dependencies: list[tuple[str, WorkloadState]]
    claims: list[Held] = field(default_factory=list)
    """Every claim granted for it, in order."""
    operator_retries: int = 0
    rearmed_from: int | None = None
    """The history length when an operator first timed it out or re-armed it (which sets
    its eligibility, ``not_before`` notwithstanding, as the reference does)."""
    decision: ApprovalOutcome | None = None
    accepted: tuple[Held, str, Any] | None = None
    """The completion the store accepted: the claim, the result id and the output."""

    @property
    def budget(self) -> int:
        return self.spec.max_attempts + self.operator_retries

    @property
    def latest(self) -> Held | None:
        return self.claims[-1] if self.claims else None


ANY: Any = object()
"""An expectation's "any value"."""


@dataclass(frozen=True)
class Expect:
    """What a workload must look like when the step that predicted it ends."""

    state: WorkloadState
    next_attempt_at: Any = ANY
    why: str = ""


@dataclass
class Tally:
    """What the machines of one test really ran, for the figures."""

    examples: int = 0
    """State machines run (each on a store of its own)."""
    steps: int = 0
    """Rules run."""
    transitions: int = 0
    """Committed history events checked against the transition table (each once)."""
    illegal: int = 0
    """Of those, the ones the table does not allow (any fails the run)."""
    claims: int = 0
    """Claims granted (and checked against the gate)."""
    completions: int = 0
    """Completions accepted (and checked to be the fence holder's)."""
    refusals: int = 0
    """Calls (and batch items) refused, each with the code predicted."""


@dataclass
class Example:
    """What an example runs on, from the test's fixture."""

    store: WorkloadStore
    tenant: str
    close: Callable[[], None]
    settle: Callable[[], None]
    """Return once the log shows every commit that has returned (see :func:`pg_settler`)."""


Opener = Callable[[int], Example]
"""Opens example ``n``'s store."""


def grant_for(tenant: str) -> SignedGrant:
    return SIGNER.sign(
        Grant(
            contract_version=1,
            id="g",
            issuer=Subject.human("h"),
            subject=REQUESTER,
            tenant_id=tenant,
            application_id=APP,
            capabilities={"workload:execute"},
            resources=[
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=f"flow://{APP}/workloads/*")
            ],
            issued_at=1,
            expires_at=10**9,
            parent_grant=None,
            revision=1,
        )
    )


class WorkloadModel(RuleBasedStateMachine):
    """The model; a subclass binds :attr:`opener` and :attr:`tally` (see the test)."""

    opener: ClassVar[Opener]
    tally: ClassVar[Tally]

    def __init__(self) -> None:
        super().__init__()
        tally = type(self).tally
        tally.examples += 1
        example = type(self).opener(tally.examples)
        self.store, self.tenant, self.closer = example.store, example.tenant, example.close
        self.settle = example.settle
        self.grant = grant_for(self.tenant)
        self.now = START
        self.workers: tuple[str, ...] = WORKERS[:1]
        self.works: dict[str, Work] = {}
        self.order: list[str] = []  # workload ids in admission order
        self.keys = 0
        self.results = 0
        self.result_owner: dict[str, str] = {}
        self.snap: dict[str, Workload] = {}
        """Every workload as committed when the last step ended (so: before this one)."""
        self.revision = self.store.db.current_revision()
        self.touched: set[str] = set()
        """The workloads this step's logged transactions named."""
        self.expect: dict[str, Expect] = {}

    def teardown(self) -> None:
        self.closer()

    # ---------------------------------------------------------------- helpers

    def _begin(self) -> None:
        type(self).tally.steps += 1

    def _commits(self) -> set[str]:
        """The model's workloads named by transactions logged since the last look."""
        self.settle()
        logged = self.store.db.committed_transactions_after(self.revision)
        named: set[str] = set()
        for tx in logged:
            self.revision = max(self.revision, tx.commit_revision)
            for key in tx.keys:
                collection, _, workload_id = key.partition("/")
                if collection == DURABLE_WORK_COLLECTION and workload_id in self.works:
                    named.add(workload_id)
        self.touched |= named
        return named

    def _committed_only(self, allowed: set[str], what: str) -> None:
        named = self._commits()
        assert named <= allowed, f"{what} committed {sorted(named - allowed)} (allowed {allowed})"

    def _refused(
        self, error: WorkloadError, workload_id: str | None, what: str, *, ends: bool = False
    ) -> None:
        """A refusal commits nothing, but the timeout or dead letter it reports (``ends``:
        the dead letter of work whose dependency ended)."""
        type(self).tally.refusals += 1
        settles = (ends or error.code in SETTLING_REFUSALS) and workload_id is not None
        allowed = {workload_id} if settles and workload_id is not None else set()
        self._committed_only(allowed, f"{what} refused {error.code}")

    def _pick(self, pick: int, states: frozenset[WorkloadState] | None = None) -> Work:
        """A workload: any, or one in ``states`` when there is one."""
        ids = [wid for wid in self.order if states is None or self.snap[wid].state in states]
        ids = ids or self.order
        return self.works[ids[pick % len(ids)]]

    def _worker(self, pick: int) -> str:
        return self.workers[pick % len(self.workers)]

    def _claim(self, pick: int, which: str, forge: str | None = None) -> Held:
        """A claim the model was given (see :data:`WHICH`); or a forgery of it (``token``: a
        token one too high; ``worker``: another worker's name).
        """
        chosen = self._claims(which)
        held = chosen[pick % len(chosen)]
        if forge == "token":
            return Held(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token + 1,
                held.claimed_at,
            )
        if forge == "worker":
            other = "intruder" if held.worker != "intruder" else "w1"
            return Held(held.workload_id, held.claim_id, other, held.fencing_token, held.claimed_at)
        return held

    def _claims(self, which: str) -> list[Held]:
        """The claims a worker call may name (see :data:`WHICH`)."""
        latest = [work.latest for work in self.works.values() if work.latest is not None]
        if which == "latest":
            return latest
        if which == "any":
            return [held for work in self.works.values() for held in work.claims]
        holding = [h for h in latest if self.snap[h.workload_id].current_claim is not None]
        running = [h for h in holding if self.snap[h.workload_id].state in RUNNING]
        return (running if which == "running" else []) or holding or latest

    def _batch(self, pick: int, count: int, which: str) -> list[Held]:
        """Up to ``count`` claims (see :data:`WHICH`) of distinct workloads: items on one
        workload would chain, which this model does not predict.
        """
        chosen = self._claims(which)
        items: dict[str, Held] = {}
        for n in range(count):
            held = chosen[(pick + n) % len(chosen)]
            items.setdefault(held.workload_id, held)
        return list(items.values())

    def _is_current(self, held: Held) -> bool:
        return self.works[held.workload_id].latest == held

    def _live(self) -> int:
        """Work that is neither finished nor dead-lettered."""
        return sum(w.state not in TERMINAL | {S.DEAD_LETTER} for w in self.snap.values())

    def _may_admit(self) -> bool:
        return self._live() < MAX_LIVE and len(self.works) < MAX_WORKLOADS

    def _has_claims(self) -> bool:
        return any(work.claims for work in self.works.values())

    def _has_ready(self) -> bool:
        return any(w.state is S.READY for w in self.snap.values())

    def _holds(self) -> bool:
        return any(w.current_claim is not None for w in self.snap.values())

    def _after_deadline(self, w: Workload, kind: str, why: str) -> Expect:
        """What a deadline enforced on ``w`` leaves (the reference's ``expire``)."""
        work = self.works[w.workload_id]
        if (
            kind in WORK_BOUNDING
            or "timeout" not in w.retry_policy.retry_on
            or w.attempt_count >= work.budget
        ):
            return Expect(S.DEAD_LETTER, why=why)
        return Expect(S.READY, self.now + w.retry_policy.initial_delay_ms // 1000, why)

    def _expect_settled(self, w: Workload, error: WorkloadError | None, what: str) -> None:
        """Record what a refusal that committed a timeout leaves."""
        if error is not None and error.code == "WORKLOAD_TIMED_OUT":
            found = breach(w, self.now)
            assert found is not None, f"{what}: TIMED_OUT, yet no deadline had passed"
            self.expect[w.workload_id] = self._after_deadline(w, found[0], what)

    def _fence_refusal(
        self,
        w: Workload,
        held: Held,
        states: frozenset[WorkloadState] | None,
        *,
        deadlines: bool = True,
    ) -> str | None:
        """The refusal a fenced call of ``held`` on ``w`` gets (the reference's ``fence``,
        after ``enforce_deadline``), or ``None`` for an accepted call.
        """
        if deadlines and breach(w, self.now) is not None:
            return "WORKLOAD_TIMED_OUT"
        current = w.current_claim
        if current is None:
            return "WORKLOAD_CLAIM_INVALID"
        if (current.claim_id, current.worker_id, current.fencing_token) != (
            held.claim_id,
            held.worker,
            held.fencing_token,
        ):
            return "WORKLOAD_STALE_FENCE"
        if current.expires_at <= self.now:
            return "WORKLOAD_LEASE_EXPIRED"
        if states is not None and w.state not in states:
            return "WORKLOAD_TRANSITION_DENIED"
        return None

    def _fenced(
        self,
        what: str,
        held: Held,
        call: Callable[[], Any],
        states: frozenset[WorkloadState] | None,
        *,
        deadlines: bool = True,
        commits: bool = True,
    ) -> tuple[bool, Any]:
        """Call a fenced operation and check its outcome against the prediction: accepted
        only from the current, unexpired holder of the fence. Answers (accepted, answer).
        """
        w = self.snap[held.workload_id]
        predicted = self._fence_refusal(w, held, states, deadlines=deadlines)
        try:
            answer = call()
        except WorkloadError as error:
            event(f"{what}: {error.code}")
            assert predicted == error.code, f"{what} by {held}: refused {error}, not {predicted}"
            if not self._is_current(held):
                assert error.code in STALE_REFUSALS, f"{what}: stale claim refused {error.code}"
            self._refused(error, held.workload_id, what)
            self._expect_settled(w, error, what)
            return False, error
        event(f"{what}: accepted")
        assert self._is_current(held), f"{what} accepted a stale or forged claim {held}"
        assert predicted is None, f"{what} by {held} was accepted; expected {predicted}"
        self._committed_only({held.workload_id} if commits else set(), what)
        return True, answer

    def _claimable_refusal(self, w: Workload, worker: str) -> str | None:
        """The refusal ``claim`` gets (the reference's ``claim``, and dependencies), or
        ``None``.
        """
        if breach(w, self.now) is not None:
            return "WORKLOAD_TIMED_OUT"
        if w.state is S.READY and w.attempt_count >= self.works[w.workload_id].budget:
            return "WORKLOAD_ATTEMPTS_EXHAUSTED"
        if w.state is S.AWAITING_APPROVAL:
            return "WORKLOAD_APPROVAL_PENDING"
        if w.state is S.REJECTED:
            return "WORKLOAD_REJECTED"
        if w.state is not S.READY:
            return "WORKLOAD_NOT_READY"
        if self._dependency_ended(w):  # dead-lettered by the claim that finds it
            return "WORKLOAD_NOT_READY"
        if w.approval is not None and not w.approval.approved():
            return "WORKLOAD_APPROVAL_PENDING"
        if w.next_attempt_at is not None and w.next_attempt_at > self.now:
            return "WORKLOAD_NOT_YET_ELIGIBLE"
        # Unlike the reference, a claim by id waits for dependencies as the scheduler does.
        if not self._dependencies_met(w):
            return "WORKLOAD_NOT_YET_ELIGIBLE"
        if not w.capability_snapshot <= CAPABILITIES[worker]:
            return "WORKLOAD_CAPABILITY_DENIED"
        return None

    def _dependency_ended(self, w: Workload) -> bool:
        """Whether a dependency of ``w`` rests in a state other than the one it awaits."""
        return any(
            d.workload_id in self.snap
            and self.snap[d.workload_id].state in RESTING
            and self.snap[d.workload_id].state is not d.required_state
            for d in w.dependencies
        )

    def _dependencies_met(self, w: Workload) -> bool:
        return all(
            d.workload_id in self.snap and self.snap[d.workload_id].state is d.required_state
            for d in w.dependencies
        )

    def _granted(self, claim: WorkloadClaim, worker: str, lease_ms: int, started: bool) -> None:
        """Check a granted claim against the model and the workload it was granted on."""
        work = self.works[claim.workload_id]
        w = self.snap[claim.workload_id]
        token = len(work.claims) + 1
        # The gate, stated from the model: never early, never unapproved, never without the
        # capabilities, and (by the scheduler and by id alike) never with unmet dependencies.
        if work.not_before is not None and work.rearmed_from is None:
            assert self.now >= work.not_before, f"claimed at {self.now} before not_before"
        assert w.next_attempt_at is None or w.next_attempt_at <= self.now, "claimed early"
        if work.spec.approval:
            assert work.decision is ApprovalOutcome.APPROVED, "claimed without approval"
        assert w.capability_snapshot <= CAPABILITIES[worker], "claimed without capabilities"
        assert self._dependencies_met(w), "work was claimed with unmet dependencies"
        # The claim, as the reference derives it.
        assert claim.worker_id == worker
        assert claim.fencing_token == token == w.fencing_token + 1, "fencing token"
        assert claim.claim_id == expected_claim_id(claim.workload_id, token, worker)
        assert claim.lease_id == f"lease_{token}"
        assert claim.claimed_at == claim.last_heartbeat == self.now
        assert claim.expires_at == self.now + lease_ms // 1000
        type(self).tally.claims += 1
        work.claims.append(Held(claim.workload_id, claim.claim_id, worker, token, claim.claimed_at))
        self.expect[claim.workload_id] = Expect(
            S.RUNNING if started else S.CLAIMED, w.next_attempt_at, "claimed"
        )

    def _scheduled(
        self, worker: str, wanted: int, definitions: frozenset[str] | None
    ) -> tuple[list[str], dict[str, Expect]]:
        """Which work ``claim_next``/``claim_many`` claim, in order, and what each candidate
        settled on the way (past a deadline, or out of attempts) is left as.
        """
        held = CAPABILITIES[worker]
        eligible = [
            w
            for w in self.snap.values()
            if w.state is S.READY
            and (w.next_attempt_at is None or w.next_attempt_at <= self.now)
            and (definitions is None or w.definition_id in definitions)
            and w.capability_snapshot <= held
        ]
        # Work whose dependency ended is read, and ended, unless a claim set it aside
        # waiting on another dependency (then it ends once that one comes to rest).
        ended = {w.workload_id for w in eligible if self._dependency_ended(w)}
        if ended:
            ended -= set_aside_keys(self.store.db.target, DURABLE_WORK_COLLECTION)
        candidates = sorted(
            (w for w in eligible if w.workload_id in ended or self._dependencies_met(w)),
            key=lambda w: (-w.priority, w.created_at, w.workload_id),
        )
        claimed: list[str] = []
        settled: dict[str, Expect] = {}
        for w in candidates:
            if len(claimed) >= wanted:
                break
            found = breach(w, self.now)
            if w.workload_id in ended:
                settled[w.workload_id] = Expect(S.DEAD_LETTER, why="scheduler: dependency ended")
                continue
            if found is not None:
                settled[w.workload_id] = self._after_deadline(w, found[0], "scheduler deadline")
            elif w.attempt_count >= self.works[w.workload_id].budget:
                settled[w.workload_id] = Expect(S.DEAD_LETTER, why="scheduler: budget spent")
            elif self._claimable_refusal(w, worker) is None:
                claimed.append(w.workload_id)
        return claimed, settled, self._may_end(eligible, ended, settled)

    def _may_end(
        self, eligible: list[Workload], ended: set[str], settled: dict[str, Expect]
    ) -> set[str]:
        """Work the call may also end: waiting on work it settles into a rest (or on such
        work, down the chain). The scheduler reads page by page, committing each page's
        choices before the next, so whether it reads the dependent after the settling
        depends on where the pages fall."""
        rested = {wid for wid, then in settled.items() if then.state in RESTING}
        maybe: set[str] = set()
        grew = True
        while grew:
            grew = False
            for w in eligible:
                if w.workload_id in maybe | ended | set(settled):
                    continue
                if any(d.workload_id in rested | maybe for d in w.dependencies):
                    maybe.add(w.workload_id)
                    grew = True
        return maybe

    def _request(self, spec: Spec, key: str, dependencies: list[tuple[str, WorkloadState]]) -> Work:
        not_before = self.now + spec.not_before_in if spec.not_before_in is not None else None
        fields: dict[str, Any] = dict(
            tenant_id=self.tenant,
            application_id=APP,
            environment="production",
            definition_id=spec.definition,
            definition_revision="r1",
            trigger="model",
            input={"key": key},
            requested_by=REQUESTER,
            authorization_snapshot=self.grant,
            capability_snapshot={"email:send", "gpu"} if spec.gpu else {"email:send"},
            priority=spec.priority,
            idempotency_key=key,
            retry_policy=WorkloadRetryPolicy(
                max_attempts=spec.max_attempts,
                initial_delay_ms=spec.initial_delay_ms,
                backoff=spec.backoff,
                retry_on=spec.retry_on,
            ),
            timeouts=WorkloadTimeouts(
                overall_ms=spec.overall_ms,
                queue_ms=spec.queue_ms,
                claim_ms=spec.claim_ms,
                execution_ms=spec.execution_ms,
                heartbeat_ms=spec.heartbeat_ms,
                approval_ms=spec.approval_ms,
            ),
            dependencies=[
                WorkloadDependency(workload_id=wid, required_state=state)
                for wid, state in dependencies
            ],
            not_before=not_before,
            created_at=self.now,
            approval=ApprovalPolicy() if spec.approval else None,
        )
        workload_id = expected_workload_id(self.tenant, APP, REQUESTER, key)
        return Work(workload_id, spec, fields, not_before, dependencies)

    def _new_key(self) -> str:
        self.keys += 1
        return f"k{self.keys}"

    def _resolve(self, spec: Spec, ids: list[str]) -> list[tuple[str, WorkloadState]]:
        chosen: dict[str, WorkloadState] = {}
        for pick, state in spec.dependencies:
            if ids:
                chosen.setdefault(ids[pick % len(ids)], state)
        return list(chosen.items())

    def _check_admitted(self, work: Work, workload: Workload) -> None:
        assert workload.workload_id == work.workload_id, "workload id is not the API's"
        first = S.AWAITING_APPROVAL if work.spec.approval else S.READY
        assert workload.state is first
        assert workload.next_attempt_at == work.not_before
        assert [d.workload_id for d in workload.dependencies] == [d for d, _ in work.dependencies]
        self.expect[work.workload_id] = Expect(first, work.not_before, "admitted")

    def _adopt(self, work: Work) -> None:
        self.works[work.workload_id] = work
        self.order.append(work.workload_id)

    # ---------------------------------------------------------------- rules: setup, clock

    @initialize(workers=st.integers(1, 3), first=st.lists(specs, min_size=1, max_size=3))
    def begin(self, workers: int, first: list[Spec]) -> None:
        """One to three workers, and the first work, admitted one by one."""
        self.workers = WORKERS[:workers]
        for spec in first:
            self._admit(spec)

    @rule(
        seconds=st.integers(0, 3) | st.integers(0, 3) | st.integers(0, 3) | st.integers(15, 400),
        maintenance=st.sampled_from([None, None, "deadlines", "recovery", "both"]),
    )
    def advance(self, seconds: int, maintenance: str | None) -> None:
        """The clock: a few seconds, or far ahead (past leases, deadlines and backoffs);
        then perhaps maintenance: ``enforce_deadlines``, ``recover_expired``, or both (each
        predicted from what the one before it left).
        """
        self._begin()
        self.now += seconds
        if maintenance in ("deadlines", "both"):
            self._enforce_deadlines()
        if maintenance == "both":
            self.the_store_keeps_the_model()
        if maintenance in ("recovery", "both"):
            self._recover_expired()

    # ---------------------------------------------------------------- rules: requesters

    @rule(
        spec=specs,
        again=st.sampled_from([None, None, None, "same", "differ"]),
        pick=st.integers(0, 63),
    )
    def admit(self, spec: Spec, again: str | None, pick: int) -> None:
        """Admit new work; or (``again``, or when no more may be admitted) repeat the key of
        existing work, with the same request or a different one.
        """
        self._begin()
        if again is None and self._may_admit():
            self._admit(spec)
        else:
            self._readmit(pick, again == "differ")

    def _admit(self, spec: Spec) -> None:
        work = self._request(spec, self._new_key(), self._resolve(spec, self.order))
        workload, created = self.store.admit(CreateWorkload(**work.fields))
        assert created
        self._adopt(work)
        self._check_admitted(work, workload)
        self._committed_only({work.workload_id}, "admit")

    @precondition(_may_admit)
    @rule(
        batch=st.lists(specs, min_size=1, max_size=3),
        repeat=st.booleans(),
        invalid=st.booleans(),
        replay=st.booleans(),
    )
    def admit_many(self, batch: list[Spec], repeat: bool, invalid: bool, replay: bool) -> None:
        """A batch of new work (an item may depend on an earlier one), and perhaps an item
        repeating an earlier one's key, an invalid item and a replay of existing work.
        """
        self._begin()
        batch = batch[: min(MAX_WORKLOADS - len(self.works), MAX_LIVE - self._live())]
        requests: list[CreateWorkload] = []
        planned: list[tuple[str, Any]] = []
        ids = list(self.order)
        for spec in batch:
            work = self._request(spec, self._new_key(), self._resolve(spec, ids))
            ids.append(work.workload_id)
            requests.append(CreateWorkload(**work.fields))
            planned.append(("new", work))
        if repeat:
            requests.append(requests[0])
            planned.append(("repeat", planned[0][1]))
        if invalid:
            work = self._request(batch[0], self._new_key(), [])
            fields = {**work.fields, "timeouts": WorkloadTimeouts(queue_ms=0)}
            requests.append(CreateWorkload(**fields))
            planned.append(("invalid", None))
        if replay and self.order:
            existing = self.works[self.order[0]]
            requests.append(CreateWorkload(**{**existing.fields, "created_at": self.now}))
            planned.append(("replay", existing))
        answers = self.store.admit_many(requests)
        assert len(answers) == len(requests)
        new: set[str] = set()
        for (kind, work), answer in zip(planned, answers, strict=True):
            if kind == "invalid":
                assert isinstance(answer, WorkloadError), answer
                assert answer.code == "WORKLOAD_INVALID", answer
                type(self).tally.refusals += 1
                continue
            assert not isinstance(answer, WorkloadError), f"{kind} item refused: {answer}"
            workload, created = answer
            assert created == (kind == "new"), f"{kind} item: created={created}"
            assert workload.workload_id == work.workload_id
            if kind == "new":
                self._adopt(work)
                self._check_admitted(work, workload)
                new.add(work.workload_id)
            elif kind == "replay":
                assert workload == self.snap[work.workload_id]
        self._committed_only(new, "admit_many")

    def _readmit(self, pick: int, differ: bool) -> None:
        """The same key again: the original for the same request (later ``created_at`` and
        another trigger do not count), ``IDEMPOTENCY_KEY_REUSED`` naming what differs.
        """
        work = self._pick(pick)
        fields = {**work.fields, "created_at": self.now, "trigger": "again"}
        if differ:
            fields["priority"] = work.spec.priority + 1
        try:
            workload, created = self.store.admit(CreateWorkload(**fields))
        except WorkloadError as error:
            assert differ, f"an identical replay was refused: {error}"
            assert error.code == "IDEMPOTENCY_KEY_REUSED"
            assert error.details == {"fields": ["priority"]}, error.details
            self._refused(error, None, "readmit")
            return
        assert not differ, "a different request under a used key was answered"
        assert not created
        assert workload == self.snap[work.workload_id]
        self._committed_only(set(), "replayed admission")

    # ---------------------------------------------------------------- rules: claiming

    @precondition(lambda self: bool(self.works))
    @rule(
        pick=st.integers(0, 63),
        ready=st.booleans(),
        worker=st.integers(0, 2),
        lease_ms=LEASES,
    )
    def claim(self, pick: int, ready: bool, worker: int, lease_ms: int) -> None:
        """Claim one workload: any, or (``ready``) one that is ``READY``, if there is one."""
        self._begin()
        work, name = self._pick(pick, frozenset({S.READY}) if ready else None), self._worker(worker)
        w = self.snap[work.workload_id]
        predicted = self._claimable_refusal(w, name)
        try:
            claim = self.store.claim(
                work.workload_id, name, CAPABILITIES[name], now=self.now, lease_ms=lease_ms
            )
        except WorkloadError as error:
            event(f"claim: {error.code}")
            assert error.code == predicted, f"claim refused {error}, not {predicted}"
            ended = error.code == "WORKLOAD_NOT_READY" and w.state is S.READY
            self._refused(error, work.workload_id, "claim", ends=ended)
            self._expect_settled(w, error, "claim")
            if error.code == "WORKLOAD_ATTEMPTS_EXHAUSTED":
                self.expect[w.workload_id] = Expect(S.DEAD_LETTER, why="claim: budget spent")
            if ended:
                self.expect[w.workload_id] = Expect(S.DEAD_LETTER, why="claim: dependency ended")
            return
        event("claim: granted")
        assert predicted is None, f"claim was granted; expected {predicted}"
        self._granted(claim, name, lease_ms, started=False)
        self._committed_only({work.workload_id}, "claim")

    def _claim_scheduled(
        self,
        worker: int,
        wanted: int,
        lease_ms: int,
        definitions: frozenset[str] | None,
        start: bool,
        call: Callable[[str], list[WorkloadClaim]],
    ) -> None:
        name = self._worker(worker)
        expected, settled, maybe = self._scheduled(name, wanted, definitions)
        claims = call(name)
        got = [claim.workload_id for claim in claims]
        event(f"scheduled: {len(got)} claimed, {len(settled)} settled")
        assert got == expected, f"the scheduler claimed {got}; expected {expected}"
        for claim in claims:
            self._granted(claim, name, lease_ms, started=start)
        self.expect.update(settled)
        ended = set()
        for workload_id in maybe:
            now = self.store.get(workload_id)
            if now.state is S.DEAD_LETTER:
                evidence = now.execution_history[-1].evidence
                assert evidence.get("decision") == "dependency_unmet", evidence
                ended.add(workload_id)
                self.expect[workload_id] = Expect(S.DEAD_LETTER, why="scheduler: ended after")
        event(f"scheduled: {len(ended)} of {len(maybe)} ended after their dependency")
        self._committed_only(set(got) | set(settled) | ended, "scheduled claim")

    @precondition(_has_ready)
    @rule(
        worker=st.integers(0, 2),
        lease_ms=LEASES,
        definitions=st.sampled_from([None, None, frozenset({"send"}), frozenset({"send", "sync"})]),
    )
    def claim_next(self, worker: int, lease_ms: int, definitions: frozenset[str] | None) -> None:
        """The scheduler's claim: the first claimable work in priority order, or none."""
        self._begin()

        def call(name: str) -> list[WorkloadClaim]:
            claim = self.store.claim_next(
                self.tenant,
                APP,
                name,
                CAPABILITIES[name],
                now=self.now,
                lease_ms=lease_ms,
                definitions=definitions,
            )
            return [claim] if claim is not None else []

        self._claim_scheduled(worker, 1, lease_ms, definitions, False, call)

    @precondition(_has_ready)
    @rule(
        worker=st.integers(0, 2),
        limit=st.integers(1, 3),
        start=st.booleans(),
        lease_ms=LEASES,
        definitions=st.sampled_from([None, None, frozenset({"sync"})]),
    )
    def claim_many(
        self,
        worker: int,
        limit: int,
        start: bool,
        lease_ms: int,
        definitions: frozenset[str] | None,
    ) -> None:
        """Up to ``limit`` claims in one call, each also started with ``start``."""
        self._begin()

        def call(name: str) -> list[WorkloadClaim]:
            return self.store.claim_many(
                self.tenant,
                APP,
                name,
                CAPABILITIES[name],
                limit,
                now=self.now,
                lease_ms=lease_ms,
                definitions=definitions,
                start=start,
            )

        self._claim_scheduled(worker, limit, lease_ms, definitions, start, call)

    # ---------------------------------------------------------------- rules: workers

    @precondition(_has_claims)
    @rule(
        call=st.sampled_from(
            [
                "start",
                "heartbeat",
                "execution_context",
                "checkpoint",
                "complete",
                "fail",
                "confirm_cancel",
            ]
        ),
        pick=st.integers(0, 63),
        which=WHICH,
        forge=st.sampled_from([None, None, None, "token", "worker"]),
        extend_ms=st.sampled_from([0, 3_000, 30_000]),
        kind=st.sampled_from([*RETRY_KINDS, "invalid_input"]),
        effect=st.sampled_from([None, None, "none", "unknown"]),
        error=st.sampled_from(["boom", "bang"]),
        result=st.sampled_from(["new", "new", "own", "other"]),
    )
    def worker_call(
        self,
        call: str,
        pick: int,
        which: str,
        forge: str | None,
        extend_ms: int,
        kind: str,
        effect: str | None,
        error: str,
        result: str,
    ) -> None:
        """One fenced call of a worker, naming a claim it was given (see :data:`WHICH`) or
        a forgery of one (``forge``); each argument is used by the calls it applies to.
        """
        self._begin()
        held = self._claim(pick, which, forge)
        if call == "start":
            self._start(held)
        elif call == "heartbeat":
            self._heartbeat(held, extend_ms)
        elif call == "execution_context":
            self._execution_context(held)
        elif call == "checkpoint":
            self._checkpoint(held, pick % 10)
        elif call == "complete":
            self._complete(held, result)
        elif call == "fail":
            self._fail(held, kind, effect, error)
        else:
            self._confirm_cancel(held)

    @precondition(_has_claims)
    @rule(
        call=st.sampled_from(["heartbeat_many", "complete_many"]),
        pick=st.integers(0, 63),
        count=st.integers(1, 3),
        which=BATCH_WHICH,
        share=st.booleans(),
    )
    def worker_batch(self, call: str, pick: int, count: int, which: str, share: bool) -> None:
        """A batch of heartbeats or completions, of up to ``count`` distinct workloads
        (``share``: the completions all name one result id).
        """
        self._begin()
        if call == "heartbeat_many":
            self._heartbeat_many(pick, count, which)
        else:
            self._complete_many(pick, count, which, share)

    def _start(self, held: Held) -> None:
        accepted, _ = self._fenced(
            "start",
            held,
            lambda: self.store.start(
                held.workload_id, held.claim_id, held.worker, held.fencing_token, now=self.now
            ),
            frozenset({S.CLAIMED}),
        )
        if accepted:
            self.expect[held.workload_id] = Expect(S.RUNNING, why="started")

    def _heartbeat(self, held: Held, extend_ms: int) -> None:
        before = self.snap[held.workload_id].state
        accepted, claim = self._fenced(
            "heartbeat",
            held,
            lambda: self.store.heartbeat(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token,
                now=self.now,
                extend_ms=extend_ms,
            ),
            None,
        )
        if accepted:
            assert claim.expires_at == self.now + extend_ms // 1000
            assert claim.last_heartbeat == self.now
            self.expect[held.workload_id] = Expect(before, why="heartbeat")

    def _heartbeat_many(self, pick: int, count: int, which: str) -> None:
        """Heartbeats of distinct workloads."""
        items = {held.workload_id: held for held in self._batch(pick, count, which)}
        beats = [
            Heartbeat(h.workload_id, h.claim_id, h.worker, h.fencing_token, 5_000)
            for h in items.values()
        ]
        predicted = {
            h.workload_id: self._fence_refusal(self.snap[h.workload_id], h, None)
            for h in items.values()
        }
        answers = self.store.heartbeat_many(beats, now=self.now)
        allowed: set[str] = set()
        for held, answer in zip(items.values(), answers, strict=True):
            w, expected = self.snap[held.workload_id], predicted[held.workload_id]
            if isinstance(answer, WorkloadError):
                event(f"heartbeat_many: {answer.code}")
                type(self).tally.refusals += 1
                assert answer.code == expected, f"heartbeat item {answer}, not {expected}"
                if answer.code in SETTLING_REFUSALS:
                    allowed.add(held.workload_id)
                self._expect_settled(w, answer, "heartbeat_many")
                continue
            event("heartbeat_many: accepted")
            assert expected is None and self._is_current(held), f"heartbeat of {held} accepted"
            assert answer.expires_at == self.now + 5
            allowed.add(held.workload_id)
            self.expect[held.workload_id] = Expect(w.state, why="heartbeat_many")
        self._committed_only(allowed, "heartbeat_many")

    def _execution_context(self, held: Held) -> None:
        w = self.snap[held.workload_id]
        accepted, context = self._fenced(
            "execution_context",
            held,
            lambda: self.store.execution_context(
                held.workload_id, held.claim_id, held.worker, held.fencing_token, now=self.now
            ),
            None,
            commits=False,
        )
        if accepted:
            assert context.fencing_token == held.fencing_token
            assert context.attempt_id == w.attempts[-1].attempt_id
            assert [c.checkpoint_id for c in context.checkpoints] == [
                c.checkpoint_id for c in w.checkpoints
            ]
            self.expect[held.workload_id] = Expect(w.state, why="read only")

    def _checkpoint(self, held: Held, step: int) -> None:
        count = len(self.snap[held.workload_id].checkpoints)
        accepted, saved = self._fenced(
            "checkpoint",
            held,
            lambda: self.store.checkpoint(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token,
                {"step": step},
                now=self.now,
            ),
            RUNNING,
        )
        if accepted:
            assert saved.sequence == count + 1
            assert saved.checkpoint_id == f"checkpoint_{held.workload_id}_{count + 1}"
            self.expect[held.workload_id] = Expect(S.CHECKPOINTED, why="checkpointed")

    @staticmethod
    def _output(held: Held) -> dict[str, Any]:
        return {"by": held.worker, "fence": held.fencing_token}

    def _result_id(self, mode: str, workload_id: str) -> str:
        """A new result id, or one already recorded (``own``: for this workload, when it has
        one; ``other``: any).
        """
        if mode == "own":
            accepted = self.works[workload_id].accepted
            if accepted is not None:
                return accepted[1]
        if mode == "other" and self.result_owner:
            return sorted(self.result_owner)[0]
        self.results += 1
        return f"r{self.results}"

    def _completion_refusal(self, held: Held, result_id: str) -> tuple[str | None, bool]:
        """The refusal of a completion (the reference's ``complete``), or ``None``; and
        whether it is a replay of the recorded report.
        """
        owner = self.result_owner.get(result_id)
        if owner is not None:
            if owner != held.workload_id:
                return "WORKLOAD_RESULT_DUPLICATE", False
            accepted = self.works[owner].accepted
            assert accepted is not None
            if accepted[0] == held and accepted[2] == self._output(held):
                return None, True
            return "WORKLOAD_RESULT_CONFLICT", False
        return self._fence_refusal(self.snap[held.workload_id], held, RUNNING), False

    def _accept_completion(self, held: Held, result_id: str, result: Any) -> None:
        work = self.works[held.workload_id]
        assert self._is_current(held), f"a completion by stale or forged {held} was accepted"
        assert work.accepted is None, "a second completion was accepted"
        assert result.result_id == result_id
        assert result.produced_by == held.worker
        assert result.provenance == {
            "claim_id": held.claim_id,
            "fencing_token": str(held.fencing_token),
        }
        type(self).tally.completions += 1
        work.accepted = (held, result_id, self._output(held))
        self.result_owner[result_id] = held.workload_id
        self.expect[held.workload_id] = Expect(S.SUCCEEDED, why="completed")

    def _complete(self, held: Held, result: str) -> None:
        w = self.snap[held.workload_id]
        result_id = self._result_id(result, held.workload_id)
        predicted, replay = self._completion_refusal(held, result_id)
        try:
            answer = self.store.complete(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token,
                result_id,
                self._output(held),
                now=self.now,
            )
        except WorkloadError as error:
            event(f"complete: {error.code}")
            assert error.code == predicted, f"complete by {held}: {error}, not {predicted}"
            if not self._is_current(held):
                assert error.code in STALE_REFUSALS, f"stale complete refused {error.code}"
            self._refused(error, held.workload_id, "complete")
            self._expect_settled(w, error, "complete")
            return
        event("complete: replayed" if replay else "complete: accepted")
        assert predicted is None, f"complete by {held} accepted; expected {predicted}"
        if replay:
            assert answer == w.result, "a replayed completion answered another result"
            self._committed_only(set(), "replayed completion")
            return
        self._accept_completion(held, result_id, answer)
        self._committed_only({held.workload_id}, "complete")

    def _complete_many(self, pick: int, count: int, which: str, share: bool) -> None:
        """Completions of distinct workloads; with ``share``, every item names one result
        id, decided as calls in a row would be (the first accepted owns it).
        """
        shared = self._result_id("new", "") if share else None
        named = [
            (held, shared or self._result_id("new", "")) for held in self._batch(pick, count, which)
        ]
        completions = [
            Completion(h.workload_id, h.claim_id, h.worker, h.fencing_token, rid, self._output(h))
            for h, rid in named
        ]
        answers = self.store.complete_many(completions, now=self.now)
        allowed: set[str] = set()
        for (held, result_id), answer in zip(named, answers, strict=True):
            predicted, replay = self._completion_refusal(held, result_id)
            assert not replay
            w = self.snap[held.workload_id]
            if isinstance(answer, WorkloadError):
                event(f"complete_many: {answer.code}")
                type(self).tally.refusals += 1
                assert answer.code == predicted, f"completion of {held}: {answer}, not {predicted}"
                if answer.code in SETTLING_REFUSALS:
                    allowed.add(held.workload_id)
                self._expect_settled(w, answer, "complete_many")
                continue
            event("complete_many: accepted")
            assert predicted is None, f"completion of {held} accepted; expected {predicted}"
            self._accept_completion(held, result_id, answer)
            allowed.add(held.workload_id)
        self._committed_only(allowed, "complete_many")

    def _failure_replay(
        self, w: Workload, held: Held, kind: str, error: str, effect: str | None
    ) -> bool:
        """Whether this report repeats the failure the named attempt committed."""
        for attempt in w.attempts:
            if (attempt.claim_id, attempt.worker_id, attempt.fencing_token) == (
                held.claim_id,
                held.worker,
                held.fencing_token,
            ) and attempt.status in (AttemptStatus.FAILED, AttemptStatus.SUCCEEDED):
                if attempt.status is not AttemptStatus.FAILED or attempt.error != error:
                    return False
                events = [
                    e
                    for e in w.execution_history
                    if e.to is S.FAILED and e.evidence.get("attempt_id") == attempt.attempt_id
                ]
                return (
                    bool(events)
                    and events[-1].evidence.get("failure_kind") == kind
                    and (effect is None or events[-1].evidence.get("effect") == effect)
                )
        return False

    def _fail(self, held: Held, kind: str, effect: str | None, error: str) -> None:
        w = self.snap[held.workload_id]
        if self._failure_replay(w, held, kind, error, effect):
            state = self.store.fail(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token,
                kind,
                error,
                now=self.now,
                effect=effect,
            )
            event("fail: replayed")
            assert state is w.state, "a repeated failure report did not replay its outcome"
            self._committed_only(set(), "replayed failure")
            return
        accepted, state = self._fenced(
            "fail",
            held,
            lambda: self.store.fail(
                held.workload_id,
                held.claim_id,
                held.worker,
                held.fencing_token,
                kind,
                error,
                now=self.now,
                effect=effect,
            ),
            HELD,
        )
        if not accepted:
            return
        work = self.works[held.workload_id]
        policy = w.retry_policy
        allowed = ("worker_failure" if effect == "unknown" else kind) in policy.retry_on
        if allowed and w.attempt_count < work.budget:
            multiplier = 2**w.retry_count if policy.backoff is BackoffPolicy.EXPONENTIAL else 1
            delay = min(policy.initial_delay_ms * multiplier, policy.max_delay_ms)
            expected = Expect(S.READY, self.now + delay // 1000, "failed, retried")
        else:
            expected = Expect(S.DEAD_LETTER, why="failed, not retried")
        assert state is expected.state, f"fail answered {state}; expected {expected}"
        self.expect[held.workload_id] = expected

    def _confirm_cancel(self, held: Held) -> None:
        accepted, _ = self._fenced(
            "confirm_cancel",
            held,
            lambda: self.store.confirm_cancel(
                held.workload_id, held.claim_id, held.worker, held.fencing_token, now=self.now
            ),
            frozenset({S.CANCELLATION_REQUESTED}),
            deadlines=False,
        )
        if accepted:
            self.expect[held.workload_id] = Expect(S.CANCELLED, why="cancellation confirmed")

    @precondition(_holds)
    @rule(
        pick=st.integers(0, 63),
        choice=st.integers(0, 9),
        kind=st.sampled_from([*RETRY_KINDS, "invalid_input"]),
    )
    def work(self, pick: int, choice: int, kind: str) -> None:
        """A worker going about its held work: the next call its state calls for (start,
        then checkpoints, heartbeats and a completion or a failure; the confirmation of a
        requested cancellation), whether or not its lease or a deadline has run out.
        """
        self._begin()
        held = self._claim(pick, "held")
        state = self.snap[held.workload_id].state
        if state is S.CANCELLATION_REQUESTED and 2 < choice < 7:
            self._confirm_cancel(held)  # else it has not heard of the cancellation yet
        elif choice == 0 or (choice < 3 and state is S.CANCELLATION_REQUESTED):
            self._fail(held, kind, None, "boom")
        elif state is S.CLAIMED:
            self._start(held)
        elif choice < 3:
            self._checkpoint(held, choice)
        elif choice < 4:
            self._heartbeat(held, 30_000)
        else:
            self._complete(held, "new")

    # ---------------------------------------------------------------- rules: operators

    def _operator(
        self,
        what: str,
        work: Work,
        predicted: str | None,
        expected: Expect | None,
        call: Callable[[], Any],
        also: dict[str, Expect] | None = None,
    ) -> Any:
        """Run an operator's ``call`` on ``work``: refused ``predicted``, or leaving it
        ``expected`` (and ``also`` the other work it re-arms)."""
        try:
            answer = call()
        except WorkloadError as error:
            event(f"{what}: {error.code}")
            assert error.code == predicted, f"{what}: refused {error}, not {predicted}"
            self._refused(error, work.workload_id, what)
            return error
        event(f"{what}: accepted")
        assert predicted is None, f"{what} accepted; expected {predicted}"
        assert expected is not None
        self.expect[work.workload_id] = expected
        self.expect.update(also or {})
        before = self.snap[work.workload_id]
        unchanged = expected.state is before.state and what == "cancel"
        changed = set() if unchanged else {work.workload_id}
        self._committed_only(changed | set(also or {}), what)
        return answer

    @precondition(lambda self: bool(self.works))
    @rule(
        operation=st.sampled_from(["cancel", "timeout", "retry", "retry"]),
        pick=st.integers(0, 63),
        fitting=st.booleans(),
    )
    def operate(self, operation: str, pick: int, fitting: bool) -> None:
        """An operator's cancel, timeout or re-arm, of any work, or (``fitting``) of work it
        fits, if there is some: held work to cancel, ready or held work to time out,
        dead-lettered work to re-arm.
        """
        self._begin()
        fits = {"cancel": HELD, "timeout": HELD | {S.READY}, "retry": frozenset({S.DEAD_LETTER})}
        work = self._pick(pick, fits[operation] if fitting else None)
        {"cancel": self._cancel, "timeout": self._timeout, "retry": self._retry}[operation](work)

    def _cancel(self, work: Work) -> None:
        w = self.snap[work.workload_id]
        predicted: str | None = None
        expected: Expect | None = None
        if w.state in CANCEL_AT_ONCE:
            expected = Expect(S.CANCELLED, why="cancelled")
        elif w.state in HELD:
            expected = Expect(S.CANCELLATION_REQUESTED, why="cancellation requested")
        elif w.state is S.CANCELLATION_REQUESTED:
            expected = Expect(S.CANCELLATION_REQUESTED, why="requested again")
        else:
            predicted = "WORKLOAD_TRANSITION_DENIED"
        answer = self._operator(
            "cancel",
            work,
            predicted,
            expected,
            lambda: self.store.cancel(work.workload_id, "operator", now=self.now),
            # A dead letter's cancel re-arms what it ended, as its retry does.
            self._rearmed_with(work.workload_id) if w.state is S.DEAD_LETTER else None,
        )
        if expected is not None:
            assert answer is expected.state

    def _timeout(self, work: Work) -> None:
        """An operator's timeout: of ready or held work only, whatever its deadlines."""
        w = self.snap[work.workload_id]
        predicted: str | None = None
        expected: Expect | None = None
        if w.state is S.READY or w.state in HELD:
            if "timeout" in w.retry_policy.retry_on and w.attempt_count < work.budget:
                delay = w.retry_policy.initial_delay_ms // 1000
                expected = Expect(S.READY, self.now + delay, "operator timeout, retried")
            else:
                expected = Expect(S.DEAD_LETTER, why="operator timeout, dead-lettered")
        else:
            predicted = "WORKLOAD_TRANSITION_DENIED"
        answer = self._operator(
            "timeout",
            work,
            predicted,
            expected,
            lambda: self.store.timeout(work.workload_id, "operator", now=self.now),
        )
        if expected is not None:
            assert answer is expected.state
            if work.rearmed_from is None:
                work.rearmed_from = len(w.execution_history)

    def _retry(self, work: Work) -> None:
        """An operator's re-arm: at most ``max_attempts`` of them, each one more attempt."""
        w = self.snap[work.workload_id]
        predicted: str | None = None
        expected: Expect | None = None
        if w.state not in OPERATOR_RETRYABLE:
            predicted = "WORKLOAD_TRANSITION_DENIED"
        elif work.operator_retries >= w.retry_policy.max_attempts:
            predicted = "WORKLOAD_RETRY_EXHAUSTED"
        elif work.spec.approval and work.decision is not ApprovalOutcome.APPROVED:
            expected = Expect(S.AWAITING_APPROVAL, self.now, "re-armed, awaiting approval")
        else:
            expected = Expect(S.READY, self.now, "re-armed")
        self._operator(
            "retry",
            work,
            predicted,
            expected,
            lambda: self.store.retry(work.workload_id, "operator", now=self.now, reason="model"),
            self._rearmed_with(work.workload_id) if expected is not None else None,
        )
        if expected is not None:
            work.operator_retries += 1
            if work.rearmed_from is None:
                work.rearmed_from = len(w.execution_history)

    def _rearmed_with(self, workload_id: str) -> dict[str, Expect]:
        """The work an operator's retry of ``workload_id`` re-arms: what it ended (by the
        claim that found its dependency at rest), down the chain, as it was before."""
        through: dict[str, list[Workload]] = {}
        for w in self.snap.values():
            last = w.execution_history[-1] if w.execution_history else None
            if w.state is S.DEAD_LETTER and last is not None:
                if last.evidence.get("decision") == "dependency_unmet":
                    through.setdefault(last.evidence["dependency"], []).append(w)
        rearmed: dict[str, Expect] = {}
        queue = [workload_id]
        while queue:
            for w in through.get(queue.pop(), []):
                if w.workload_id not in rearmed:
                    rearmed[w.workload_id] = Expect(S.READY, w.next_attempt_at, "re-armed after")
                    queue.append(w.workload_id)
        return rearmed

    @precondition(lambda self: any(work.spec.approval for work in self.works.values()))
    @rule(
        pick=st.integers(0, 63),
        approve=st.sampled_from([True, True, False]),
        decider=st.sampled_from([ADA, ADA, ADA, SVC]),
        stale=st.sampled_from([False, False, False, True]),
    )
    def decide(self, pick: int, approve: bool, decider: Subject, stale: bool) -> None:
        """Decide work (that awaits approval, if any does)."""
        self._begin()
        work = self._pick(pick, frozenset({S.AWAITING_APPROVAL}))
        w = self.snap[work.workload_id]
        outcome = ApprovalOutcome.APPROVED if approve else ApprovalOutcome.REJECTED
        reason = None if approve else "not this one"
        input_hash = "sha256:stale" if stale else w.input_hash
        predicted: str | None = None
        replay = False
        found = breach(w, self.now)
        if w.approval is None:
            predicted = "WORKLOAD_APPROVAL_NOT_REQUIRED"
        elif decider != ADA:
            predicted = "WORKLOAD_APPROVER_NOT_PERMITTED"
        elif stale:
            predicted = "WORKLOAD_APPROVAL_STALE"
        elif work.decision is not None:
            replay = work.decision is outcome
            predicted = None if replay else "WORKLOAD_APPROVAL_DECIDED"
        elif found is not None:
            predicted = "WORKLOAD_TIMED_OUT"
        elif w.state is not S.AWAITING_APPROVAL:
            predicted = "WORKLOAD_APPROVAL_NOT_ACTIONABLE"
        try:
            decision, replayed = self.store.decide(
                work.workload_id, decider, outcome, reason, "g", input_hash, now=self.now
            )
        except WorkloadError as error:
            event(f"decide: {error.code}")
            assert error.code == predicted, f"decide: refused {error}, not {predicted}"
            self._refused(error, work.workload_id, "decide")
            self._expect_settled(w, error, "decide")
            return
        event("decide: replayed" if replay else "decide: accepted")
        assert predicted is None, f"decide accepted; expected {predicted}"
        assert replayed == replay
        assert decision.outcome is outcome and decision.decided_by == decider
        if replay:
            self._committed_only(set(), "replayed decision")
            return
        work.decision = outcome
        state = S.READY if approve else S.REJECTED
        self.expect[work.workload_id] = Expect(state, w.next_attempt_at, "decided")
        self._committed_only({work.workload_id}, "decide")

    # ---------------------------------------------------------------- rules: maintenance

    def _enforce_deadlines(self) -> None:
        due = {wid: found for wid, w in self.snap.items() if (found := breach(w, self.now))}
        acted = {wid for wid in self.store.enforce_deadlines(now=self.now) if wid in self.works}
        event(f"enforce_deadlines: {len(acted)}")
        assert acted == set(due), f"timed out {sorted(acted)}; due {sorted(due)}"
        for wid, (kind, _) in due.items():
            self.expect[wid] = self._after_deadline(self.snap[wid], kind, f"{kind} deadline")
        self._committed_only(acted, "enforce_deadlines")

    def _recover_expired(self) -> None:
        lapsed = {
            wid
            for wid, w in self.snap.items()
            if w.current_claim is not None
            and w.current_claim.expires_at <= self.now
            and w.state in LEASED
        }
        acted = {wid for wid in self.store.recover_expired(now=self.now) if wid in self.works}
        event(f"recover_expired: {len(acted)}")
        assert acted == lapsed, f"recovered {sorted(acted)}; lapsed {sorted(lapsed)}"
        for wid in lapsed:
            w, work = self.snap[wid], self.works[wid]
            if w.state is S.CANCELLATION_REQUESTED:
                self.expect[wid] = Expect(S.CANCELLED, why="recovered a requested cancel")
            elif "worker_failure" in w.retry_policy.retry_on and w.attempt_count < work.budget:
                self.expect[wid] = Expect(S.READY, w.next_attempt_at, "recovered, retried")
            else:
                self.expect[wid] = Expect(S.DEAD_LETTER, why="recovered, dead-lettered")
        self._committed_only(acted, "recover_expired")

    # ---------------------------------------------------------------- invariants

    @invariant()
    def the_store_keeps_the_model(self) -> None:
        self._commits()
        listed = self.store.list(self.tenant, APP)
        keys = [(-w.priority, w.created_at, w.workload_id) for w in listed]
        assert keys == sorted(keys), "list is not in priority, then admission, order"
        now = {w.workload_id: w for w in listed}
        assert set(now) == set(self.works), "the store lost or invented work"
        for wid, w in now.items():
            work, before = self.works[wid], self.snap.get(wid)
            self._check_history(work, w, len(before.execution_history) if before else 0)
            self._check_attempts(work, w)
            self._check_claims(work, w)
            self._check_result(work, w)
            self._check_approval(work, w)
            if before is not None:
                self._check_growth(before, w)
                if before != w:
                    assert wid in self.touched, f"{wid} changed without a logged transaction"
                    assert self.store.get(wid) == w
            expected = self.expect.pop(wid, None)
            if expected is not None:
                assert w.state is expected.state, (
                    f"{wid} is {w.state}; expected {expected.state} ({expected.why})"
                )
                if expected.next_attempt_at is not ANY:
                    assert w.next_attempt_at == expected.next_attempt_at, (
                        f"{wid} eligible at {w.next_attempt_at}; expected "
                        f"{expected.next_attempt_at} ({expected.why})"
                    )
            elif before is not None:
                assert w == before, f"{wid} changed unexpectedly"
        assert not self.expect, f"expected work that is not there: {self.expect}"
        for w in listed:
            event(f"state seen: {w.state.value}")
        self.snap = now
        self.touched = set()

    def _check_history(self, work: Work, w: Workload, seen: int) -> None:
        """``w``'s history, of which the model checked ``seen`` events before."""
        history = w.execution_history
        tally = type(self).tally
        tally.transitions += len(history) - seen
        tally.illegal += sum((e.from_state, e.to) not in LEGAL_EDGES for e in history[seen:])
        assert history, "no history"
        assert [e.sequence for e in history] == list(range(1, len(history) + 1)), "sequence gap"
        first = history[0]
        assert first.from_state is S.CREATED
        assert first.to is (S.AWAITING_APPROVAL if work.spec.approval else S.READY)
        previous: WorkloadState = S.CREATED
        at = w.created_at
        tokens: list[int] = []
        succeeded = 0
        approved = False
        for e in history:
            edge = (e.from_state, e.to)
            assert edge in LEGAL_EDGES, f"illegal transition {edge} in {w.workload_id}"
            assert e.from_state is previous, f"event {e.sequence} does not follow"
            assert e.event_type == EVENT_NAMES[e.to]
            assert at <= e.at <= self.now, f"event {e.sequence} at {e.at}"
            previous, at = e.to, e.at
            if e.to is S.CLAIMED:
                tokens.append(int(e.evidence["fencing_token"]))
                if work.spec.approval:
                    assert approved, "claimed before an approval committed"
                if work.not_before is not None and (
                    work.rearmed_from is None or e.sequence <= work.rearmed_from
                ):
                    assert e.at >= work.not_before, "claimed before not_before"
            if e.from_state is S.AWAITING_APPROVAL and e.to is S.READY:
                approved = True
            if not work.spec.approval:
                assert e.to is not S.AWAITING_APPROVAL
            succeeded += e.to is S.SUCCEEDED
        assert previous is w.state, "the last event is not the state"
        assert w.state not in TRANSIENT, f"a transient state {w.state} was committed"
        assert tokens == list(range(1, len(tokens) + 1)), f"fencing tokens {tokens}"
        assert succeeded <= 1, "succeeded twice"
        re_arms = [e for e in history if e.evidence.get("retry") == "operator"]
        assert len(re_arms) == work.operator_retries

    def _check_attempts(self, work: Work, w: Workload) -> None:
        claims = work.claims
        assert w.attempt_count == len(w.attempts) == w.fencing_token == len(claims)
        assert w.attempt_count <= work.budget, "the attempt budget was exceeded"
        assert work.operator_retries <= w.retry_policy.max_attempts
        for n, (attempt, held) in enumerate(zip(w.attempts, claims, strict=True), start=1):
            assert attempt.attempt_id == f"attempt_{w.workload_id}_{n}"
            assert attempt.fencing_token == held.fencing_token == n
            assert (attempt.claim_id, attempt.worker_id) == (held.claim_id, held.worker)
            if attempt.status in OPEN_ATTEMPT:
                assert n == len(w.attempts) and w.state in LEASED, f"attempt {n} left open"
        if w.state in LEASED:
            assert w.attempts[-1].status in OPEN_ATTEMPT, "held work without an open attempt"
        succeeded = [a for a in w.attempts if a.status is AttemptStatus.SUCCEEDED]
        assert len(succeeded) <= 1, "more than one attempt succeeded"
        for n, saved in enumerate(w.checkpoints, start=1):
            assert saved.sequence == n
            assert saved.checkpoint_id == f"checkpoint_{w.workload_id}_{n}"
            producer = [a for a in w.attempts if a.attempt_id == saved.attempt_id]
            assert producer and producer[0].worker_id == saved.produced_by

    def _check_claims(self, work: Work, w: Workload) -> None:
        current = w.current_claim
        assert (current is not None) == (w.state in LEASED), "a claim without a holder"
        if current is not None:
            latest = work.latest
            assert latest is not None
            assert (
                current.claim_id,
                current.worker_id,
                current.fencing_token,
                current.claimed_at,
            ) == (latest.claim_id, latest.worker, latest.fencing_token, latest.claimed_at), (
                "the current claim is not the latest granted"
            )

    def _check_result(self, work: Work, w: Workload) -> None:
        assert (w.result is not None) == (w.state is S.SUCCEEDED)
        assert (work.accepted is not None) == (w.state is S.SUCCEEDED)
        if w.result is None or work.accepted is None:
            return
        held, result_id, output = work.accepted
        last = w.attempts[-1]
        assert last.status is AttemptStatus.SUCCEEDED, "the last attempt did not succeed"
        assert (last.claim_id, last.fencing_token) == (held.claim_id, held.fencing_token)
        assert w.result.result_id == result_id
        assert w.result.attempt_id == last.attempt_id
        assert w.result.produced_by == held.worker
        assert w.result.output == output
        assert w.result.provenance == {
            "claim_id": held.claim_id,
            "fencing_token": str(held.fencing_token),
        }, "the committed result is not the current holder's"

    def _check_approval(self, work: Work, w: Workload) -> None:
        assert (w.approval is not None) == work.spec.approval
        if w.approval is None:
            return
        decided = w.approval.decision
        assert (decided.outcome if decided is not None else None) is work.decision
        assert (w.state is S.REJECTED) == (work.decision is ApprovalOutcome.REJECTED)

    def _check_growth(self, before: Workload, w: Workload) -> None:
        """A committed history, attempt log and checkpoint list only grow; closed attempts,
        results and decisions never change; finished work never changes at all.
        """
        old = before.execution_history
        assert w.execution_history[: len(old)] == old, "history rewritten"
        assert w.checkpoints[: len(before.checkpoints)] == before.checkpoints
        for then, attempt in zip(before.attempts, w.attempts, strict=False):
            if then.status not in OPEN_ATTEMPT:
                assert attempt == then, "a closed attempt changed"
        if before.result is not None:
            assert w.result == before.result
        if before.approval is not None and before.approval.decision is not None:
            assert w.approval is not None and w.approval.decision == before.approval.decision
        if before.state in TERMINAL:
            assert w == before, "finished work changed"


# --- the test -------------------------------------------------------------------------------

EXAMPLES = {"sqlite": scaled(30, 400), "postgres": scaled(15, 400)}
"""Per backend: a PostgreSQL example costs about four SQLite ones (a database each, and a
round trip a call); the bounded run keeps its share of ``make test`` small."""
STEPS = scaled(120, 150)


def pg_settler(url: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(settle, close)`` for the PostgreSQL database at ``url``. ``settle`` returns once
    no transaction is open with an id below the newest that had ended (the snapshot's
    xmax) when it was called, so once every commit that has returned is logged: the log shows
    an entry only below every open transaction's id (feltdb/storage/postgres.py), so a
    transaction open elsewhere (autovacuum's ANALYZE, on a server configured by default)
    would hide a step's commits until a later step, which would be blamed for them.
    """
    connection = psycopg.connect(url, autocommit=True)
    horizon = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"

    def settle() -> None:
        [(xmin, xmax)] = connection.execute(
            "SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint "
            "FROM pg_current_snapshot() AS s"
        ).fetchall()
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while xmin < xmax:
            assert time.monotonic() < deadline, f"a transaction below {xmax} stays open"
            time.sleep(0.005)
            [(xmin,)] = connection.execute(horizon).fetchall()

    return settle, connection.close


SETTLE_TIMEOUT_S = 30.0


@pytest.fixture
def opener(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Each example's store, empty: a new SQLite file, or a new PostgreSQL database
    (cloned from the schema's template, dropped when the example ends).

    Every example starts from nothing on both backends so that replaying an example
    replays it exactly: with one database shared by the examples, each needed its own
    tenant, so its workload ids, and with them every tie broken by id (which workload
    ``claim_next`` takes), differed between a run and its replay, and Hypothesis could
    not shrink a failure (``FlakyStrategyDefinition``).
    """
    open_closers: list[Callable[[], None]] = []
    databases = request.getfixturevalue("pg_databases") if backend == "postgres" else None

    def open_example(n: int) -> Example:
        if databases is None:
            store = WorkloadStore.open(tmp_path / f"{n}.db")
            settle, end = (lambda: None), store.close
        else:
            database = databases.create(f"model_{n}")
            url = databases.url_of(database)
            with ExitStack() as undo:  # a failure below leaves no database behind
                undo.callback(databases.drop, database)
                store = WorkloadStore.open(url)
                undo.callback(store.close)
                settle, stop_settler = pg_settler(url)
                undo.callback(stop_settler)
                end = undo.pop_all().close  # then each is undone however the others end

        def close() -> None:
            if close in open_closers:
                open_closers.remove(close)
                end()

        open_closers.append(close)
        return Example(store, "t", close, settle)

    yield open_example
    for close in list(open_closers):
        close()


def test_random_operation_sequences_keep_every_invariant(backend: str, opener: Opener) -> None:
    tally = Tally()
    OUTCOMES.clear()

    class Bound(WorkloadModel):
        pass

    Bound.opener = staticmethod(opener)
    Bound.tally = tally
    run_state_machine_as_test(
        Bound,
        settings=settings(
            max_examples=EXAMPLES[backend],
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    assert tally.illegal == 0  # an illegal transition fails the step that committed it
    print(f"\n{backend}: {tally}; outcomes:")
    for outcome, count in sorted(OUTCOMES.items()):
        print(f"  {count:6} {outcome}")
    record(
        "model",
        "stateful",
        backend,
        examples=tally.examples,
        steps=tally.steps,
        transitions=tally.transitions,
        claims=tally.claims,
        completions=tally.completions,
        refusals=tally.refusals,
        illegal=tally.illegal,
        command="make soak",
    )
