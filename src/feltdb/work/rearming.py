"""Work ended for a dependency comes back when that dependency is retried.

A workload dead-lettered because a dependency came to rest in another state than it
awaited (decision ``dependency_unmet``: :func:`~feltdb.work.recovery.dead_letter_unmet`)
never ran, so nothing it did needs checking before it runs. When an operator retries that
dependency, every workload ended through it, and those ended through them down the chain,
is re-armed to ``READY`` (decision ``dependency_rearmed``), each by a guarded commit of its
own after the retry's: it waits for its dependency again as it did at first, and is ended
again if that one comes to rest otherwise.

A re-arm is not an operator retry of the dependent: it spends none of its retries.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeVar

from feltdb.auth.scope import Scope
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.work import operator_commands
from feltdb.work.batches import Step
from feltdb.work.changes import Operation
from feltdb.work.rows import LoadedWorkload, workload_of
from feltdb.work.states import WorkloadState
from feltdb.work.transitions import transition
from feltdb.work.unit import Load, UnitOfWork

T = TypeVar("T")

MAX_DEAD_LETTERS_READ = 10_000
"""The most dead letters of an application one retry reads to find the work it re-arms;
work ended for the dependency beyond them (an application holding more dead letters) stays
dead-lettered, and is retried by hand (``feltdb retry``)."""


def ended_through(workload: Workload) -> str | None:
    """The dependency whose ending dead-lettered ``workload`` (``None``: it was not)."""
    if workload.state is not WorkloadState.DEAD_LETTER or not workload.execution_history:
        return None
    evidence = workload.execution_history[-1].evidence
    if evidence.get("decision") != "dependency_unmet":
        return None
    return evidence.get("dependency")


def rearmed(workload: Workload, dependency_id: str, actor: str, now: int) -> Workload:
    """``workload``, ended through ``dependency_id``, ready again at ``now`` (``actor``: who
    retried the dependency).

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` if it was not ended through it (it
            was retried, cancelled or ended otherwise since).
    """
    if ended_through(workload) != dependency_id:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"workload {workload.workload_id} was not ended through {dependency_id}",
            {"dependency": dependency_id},
        )
    # It never ran: it keeps the eligibility instant it had (its not_before, say).
    evidence = {"decision": "dependency_rearmed", "dependency": dependency_id}
    return transition(workload, WorkloadState.READY, actor, now, evidence)


def rearm_dependents(
    unit: UnitOfWork, origin: Workload, actor: str, now: int, scope: Scope | None
) -> list[str]:
    """Re-arm what ``origin`` (retried or cancelled, as its command read it) had ended (read
    within ``scope``, so a narrowed operator re-arms only work it may act on), down the
    chain; the ids re-armed, in order. A dependent changed meanwhile, or out of scope, is
    passed over.
    """
    workload_id = origin.workload_id
    done: list[str] = []
    armed = {workload_id}
    for dependency_id, dependent_id in _chain(unit, origin, workload_id):
        if dependency_id not in armed:
            continue  # its dependency was not re-armed: it would only be ended again
        step = partial(_rearm_step, dependent_id, dependency_id, actor, now)
        try:
            unit.run(scope, step)
        except WorkloadError:
            continue
        armed.add(dependent_id)
        done.append(dependent_id)
    return done


def retry_with_dependents(
    unit: UnitOfWork,
    workload_id: str,
    actor: str,
    reason: str | None,
    now: int,
    scope: Scope | None,
) -> list[str]:
    """An operator's retry of ``workload_id`` (:func:`~feltdb.work.operator_commands.retry`),
    then :func:`rearm_dependents`: the ids of the work re-armed after it.
    """
    retry = partial(operator_commands.retry, workload_id, actor, reason, now)
    _, retried = _run_seeing(unit, scope, retry)
    return rearm_dependents(unit, retried, actor, now, scope)


def cancel_with_dependents(
    unit: UnitOfWork, workload_id: str, actor: str, now: int, scope: Scope | None
) -> WorkloadState:
    """An operator's cancel of ``workload_id`` (:func:`~feltdb.work.operator_commands.cancel`);
    when it was a dead letter, then :func:`rearm_dependents`: work that awaited it in
    another state than ``DEAD_LETTER`` (``CANCELLED``, say) may now be met, and work that
    awaited ``SUCCEEDED`` is ended again, saying ``CANCELLED``. The state it was left in.
    """
    cancel = partial(operator_commands.cancel, workload_id, actor, now)
    state, before = _run_seeing(unit, scope, cancel)
    if before.state is WorkloadState.DEAD_LETTER:
        rearm_dependents(unit, before, actor, now, scope)
    return state


def _run_seeing(
    unit: UnitOfWork, scope: Scope | None, command: Callable[[Load], Step[T]]
) -> tuple[T, Workload]:
    """Run ``command`` on one workload (:meth:`UnitOfWork.run`): its answer, and the
    workload as the decision that committed read it (no read of its own to learn it).
    """
    seen: list[Workload] = []

    def decide(load: Load) -> Step[T]:
        def seeing(workload_id: str) -> LoadedWorkload:
            loaded = load(workload_id)
            seen.append(loaded.workload)
            return loaded

        return command(seeing)

    answer = unit.run(scope, decide)
    return answer, seen[-1]


def _rearm_step(
    dependent_id: str, dependency_id: str, actor: str, now: int, load: Load
) -> Step[None]:
    loaded = load(dependent_id)
    decided = rearmed(loaded.workload, dependency_id, actor, now)
    return Step(loaded.decided(decided), Operation.REARM)


def _chain(unit: UnitOfWork, origin: Workload, workload_id: str) -> Iterator[tuple[str, str]]:
    """``(dependency, dependent)`` pairs ended through ``workload_id``, breadth first, from
    the application's dead letters (at most :data:`MAX_DEAD_LETTERS_READ` read).
    """
    ended: dict[str, list[str]] = {}
    rows = unit.db.list_rows(
        DURABLE_WORK_COLLECTION,
        tenant_id=origin.tenant_id,
        application_id=origin.application_id,
        state=WorkloadState.DEAD_LETTER.value,
        limit=MAX_DEAD_LETTERS_READ,
    )
    for row in rows:
        # Most dead letters were not ended by a dependency: their stored text says so
        # without a decode (a tenth of the cost of reading each one).
        if row.text is not None and "dependency_unmet" not in row.text:
            continue
        dead = workload_of(row)
        through = ended_through(dead)
        if through is not None:
            ended.setdefault(through, []).append(dead.workload_id)
    queue, seen = deque([workload_id]), {workload_id}
    while queue:
        dependency_id = queue.popleft()
        for dependent_id in ended.get(dependency_id, ()):
            if dependent_id not in seen:
                seen.add(dependent_id)
                queue.append(dependent_id)
                yield dependency_id, dependent_id
