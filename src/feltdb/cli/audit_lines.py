"""How ``feltdb audit`` says one committed transaction to a reader: on one line, who did
which operation to which work, and the state it left. ``--json`` keeps the whole record.

Rendering only, as :mod:`feltdb.cli.render`: every function takes a transaction or its
audit record (:func:`feltdb.work.audit.audit_record`) and answers text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from feltdb.cli.render import when

if TYPE_CHECKING:  # what is rendered arrives with the command that runs: not for --help
    from feltdb.storage import CommittedTransaction

UNKNOWN_KIND = "?"
"""Stands for the kind of an actor recorded as a bare name (a library caller's worker
name, a legacy record's), so that ``ada`` never shows as if it said which ``ada``."""


def audit_line(transaction: CommittedTransaction) -> str:
    """One committed transaction on one line, tab-separated: revision, time, who acted
    (:func:`acted_by`), the operation (:func:`operation_of`) with the state it left, and
    the workload (or, for a grant's revocation, the grant) it touched.
    """
    record = transaction.audit or {}
    state = record.get("state")
    what = operation_of(record) + (f" → {state}" if state else "")
    work = transaction.work_id or record.get("grant_id") or "-"
    revision, at = str(transaction.commit_revision), when(transaction.committed_at)
    return "\t".join((revision, at, acted_by(record), what, str(work)))


def operation_of(record: Mapping[str, Any]) -> str:
    """What the transaction did: the store operation (``admit``, ``claim``, ``heartbeat``,
    ``complete``, ``decide``…); for a record with none (a workload's commit by an earlier
    release, a grant's revocation, a sign-in), its kind and event (``workload.mutated/
    workload.started``), or its kind alone.
    """
    operation = record.get("operation")
    if operation:
        return str(operation)
    kind, event = record.get("kind") or "-", record.get("event_type")
    return f"{kind}/{event}" if event else str(kind)


def acted_by(record: Mapping[str, Any]) -> str:
    """Who the transaction is credited to, as ``KIND:ID`` (:func:`qualified`): the requester
    for an admission, the worker holding the claim for a heartbeat or a checkpoint, the
    attempt's worker for its completion or failure, the actor of the last event it added
    otherwise (``-``: none recorded).
    """
    from feltdb.work.changes import Operation
    from feltdb.work.rows import CREATED

    operation = record.get("operation")
    if operation == Operation.ADMIT or (operation is None and record.get("kind") == CREATED):
        # The authority only carries an admission out (its event's actor is `feltdb`): the
        # requester asked for it, and is the record's subject.
        who = record.get("subject")
    elif operation in (Operation.HEARTBEAT, Operation.CHECKPOINT):
        # Neither need add an event: the record's actor, the last event's, may be someone
        # else's (an operator's cancellation request). The claim's holder is the one.
        who = record.get("worker_id") or record.get("actor")
    elif operation in (Operation.COMPLETE, Operation.FAIL) and record.get("attempt_worker_id"):
        # A failure's last event is the retry policy's decision (`feltdb.retry`); the
        # worker that reported it is the attempt's (records of earlier releases lack it).
        who = record.get("attempt_worker_id")
    else:
        who = record.get("actor") or record.get("subject")
    return "-" if not who else qualified(str(who))


def qualified(actor: str) -> str:
    """``actor`` as ``KIND:ID``: a subject as recorded (``human:ada``, ``worker:w1``); the
    authority's own actors as they are (``feltdb``, ``feltdb.retry``…); a name recorded
    without a kind as ``?:NAME`` (:data:`UNKNOWN_KIND`).
    """
    from feltdb.cli.parsing import parse_subject
    from feltdb.errors import WorkloadError
    from feltdb.work.admission import ADMISSION_ACTOR

    # The authority names itself `feltdb`, or `feltdb.` and what decided (`feltdb.retry`).
    if actor.partition(".")[0] == ADMISSION_ACTOR:
        return actor
    try:
        return str(parse_subject(actor))
    except WorkloadError:
        return f"{UNKNOWN_KIND}:{actor}"
