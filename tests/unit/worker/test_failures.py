"""How a handler's ending becomes a report, and the worker's refusals of bad setup."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from support.factories import make_request

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import Workload, WorkloadCheckpoint, WorkloadClaim, WorkloadTimeouts
from feltdb.work.admission import new_workload
from feltdb.worker import Context, Permanent, Retryable, Worker, heartbeat_interval_s
from feltdb.worker.failures import (
    FailureReport,
    LeaseLost,
    error_text,
    failure_report,
    is_lease_lost,
    is_transient,
)

# --------------------------------------------------------------------------- error text


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (KeyError("x"), "KeyError: 'x'"),
        (ValueError("bad address"), "ValueError: bad address"),
        (ValueError("  padded \n"), "ValueError: padded"),
        (RuntimeError(), "RuntimeError"),
        (Retryable("upstream 503"), "upstream 503"),
        (Retryable(), "Retryable"),
        (Permanent("card declined", kind="declined"), "card declined"),
        (Permanent(""), "Permanent"),
    ],
)
def test_error_text_is_the_message_named_by_type(error: BaseException, text: str) -> None:
    assert error_text(error) == text


def test_error_text_carries_no_traceback() -> None:
    def nested() -> None:
        raise ZeroDivisionError("division by zero")

    try:
        nested()
    except ZeroDivisionError as error:
        caught = error
    text = error_text(caught)
    assert text == "ZeroDivisionError: division by zero"
    assert "Traceback" not in text and "nested" not in text


# --------------------------------------------------------------------------- failure report


def test_retryable_reports_its_kind_and_no_effect_before_progress() -> None:
    assert failure_report(Retryable("slow down", kind="rate_limited"), progressed=True) == (
        FailureReport("rate_limited", "slow down", None)
    )
    assert failure_report(Retryable("reset"), progressed=False) == FailureReport(
        "transient_connection", "reset", "none"
    )


def test_permanent_reports_its_kind_and_no_effect_before_progress() -> None:
    # A deliberate refusal before anything was done (issue 25: it once showed "effect
    # unknown: it may have acted" on every dead letter).
    assert failure_report(Permanent("amount must be positive"), progressed=False) == (
        FailureReport("permanent", "amount must be positive", "none")
    )
    assert failure_report(Permanent("gone", kind="not_found"), progressed=True) == (
        FailureReport("not_found", "gone", None)
    )


@pytest.mark.parametrize("error_type", [Retryable, Permanent])
@pytest.mark.parametrize("progressed", [False, True])
@pytest.mark.parametrize("effect", ["none", "unknown"])
def test_a_handler_may_say_the_effect_itself(
    error_type: type[Retryable] | type[Permanent], progressed: bool, effect: str
) -> None:
    error = error_type("said", effect=effect)  # type: ignore[arg-type]
    assert failure_report(error, progressed=progressed).effect == effect


def test_an_effect_is_none_or_unknown() -> None:
    with pytest.raises(ValueError, match="'none' or 'unknown'"):
        Permanent("x", effect="maybe")  # type: ignore[arg-type]


@pytest.mark.parametrize(("progressed", "effect"), [(False, "none"), (True, "unknown")])
def test_an_unexpected_exception_is_a_worker_failure(progressed: bool, effect: str) -> None:
    assert failure_report(KeyError("x"), progressed=progressed) == FailureReport(
        "worker_failure", "KeyError: 'x'", effect
    )


def test_lease_lost_and_transient_refusals() -> None:
    for code in (
        ErrorCode.WORKLOAD_TIMED_OUT,
        ErrorCode.WORKLOAD_STALE_FENCE,
        ErrorCode.WORKLOAD_CLAIM_INVALID,
        ErrorCode.WORKLOAD_LEASE_EXPIRED,
    ):
        error = WorkloadError(code, "gone")
        assert is_lease_lost(error) and not is_transient(error)
    for code in (ErrorCode.WORKLOAD_STORAGE_FAILURE, ErrorCode.WORKLOAD_CONFLICT):
        error = WorkloadError(code, "again")
        assert is_transient(error) and not is_lease_lost(error)
    for code in (ErrorCode.WORKLOAD_TRANSITION_DENIED, ErrorCode.WORKLOAD_SECRET_REJECTED):
        error = WorkloadError(code, "no")
        assert not is_transient(error) and not is_lease_lost(error)
    lost = LeaseLost(WorkloadError(ErrorCode.WORKLOAD_STALE_FENCE, "stale"))
    assert lost.error.code == ErrorCode.WORKLOAD_STALE_FENCE
    assert "stale" in str(lost)


# --------------------------------------------------------------------------- heartbeats


def workload(heartbeat_ms: int | None = None) -> Workload:
    request = make_request(timeouts=WorkloadTimeouts(heartbeat_ms=heartbeat_ms))
    return new_workload(request, "workload_1")


@pytest.mark.parametrize(
    ("lease_ms", "heartbeat_ms", "every_s"),
    [
        (30_000, None, 10.0),  # a third of the lease
        (3_000, None, 1.0),
        (30_000, 6_000, 2.0),  # the heartbeat deadline is shorter: a third of it
        (3_000, 60_000, 1.0),  # the lease is shorter
        (1_000, None, 1 / 3),
        (30_000, 300, 0.25),  # never more often than every quarter second
        (30_000, 0, 0.25),
    ],
)
def test_heartbeat_interval(lease_ms: int, heartbeat_ms: int | None, every_s: float) -> None:
    assert heartbeat_interval_s(workload(heartbeat_ms), lease_ms) == pytest.approx(every_s)


# --------------------------------------------------------------------------- context


def test_context_progress_and_checkpoints() -> None:
    w = workload()
    claim = WorkloadClaim(
        claim_id="c",
        workload_id=w.workload_id,
        worker_id="w1",
        lease_id="l",
        fencing_token=1,
        capability_snapshot={"email:send"},
        claimed_at=1,
        expires_at=31,
        last_heartbeat=1,
    )
    committed: list[Any] = []

    def commit(state: Any) -> WorkloadCheckpoint:
        committed.append(state)
        return WorkloadCheckpoint(
            checkpoint_id=f"cp{len(committed)}",
            workload_id=w.workload_id,
            attempt_id="a",
            sequence=len(committed),
            state=state,
            state_hash="h",
            created_at=1,
            produced_by="w1",
        )

    ctx = Context(w, claim, {"id": 1}, [], commit)
    assert ctx.last_checkpoint is None and not ctx.progressed
    assert ctx.definition_id == "send" and ctx.workload_id == "workload_1"
    ctx.mark_side_effect()
    assert ctx.progressed
    ctx2 = Context(w, claim, {"id": 1}, [], commit)
    saved = ctx2.checkpoint({"step": 1})
    assert ctx2.progressed and committed == [{"step": 1}]
    assert ctx2.checkpoints == [saved] and ctx2.last_checkpoint == {"step": 1}


# --------------------------------------------------------------------------- worker setup


def refused(error: pytest.ExceptionInfo[WorkloadError]) -> str:
    assert error.value.code == ErrorCode.WORKLOAD_INVALID
    return error.value.message


def test_concurrency_below_one_is_refused() -> None:
    with pytest.raises(WorkloadError) as error:
        Worker(store=None, concurrency=0)
    assert "concurrency" in refused(error)
    Worker(concurrency=1)


def test_a_lease_under_a_second_is_refused() -> None:
    with pytest.raises(WorkloadError) as error:
        Worker(lease_ms=500)
    assert "lease_ms" in refused(error)
    Worker(lease_ms=1000)


def test_a_definition_has_one_handler() -> None:
    worker = Worker()

    @worker.handler("send")
    def first(ctx: Context) -> Any:
        return 1

    with pytest.raises(WorkloadError) as error:

        @worker.handler("send")
        def second(ctx: Context) -> Any:
            return 2

    assert "send" in refused(error)
    assert worker.handlers == {"send": first}


def test_a_worker_without_handlers_refuses_to_run() -> None:
    with pytest.raises(WorkloadError) as error:
        Worker().drain()
    assert "no handlers" in refused(error)


@pytest.mark.parametrize(
    "env", [{}, {"FELTDB_URL": "http://127.0.0.1:1"}, {"FELTDB_TOKEN": "fgt1.x"}]
)
def test_a_worker_without_an_authority_refuses_to_run(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.delenv("FELTDB_URL", raising=False)
    monkeypatch.delenv("FELTDB_TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    worker = Worker()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        return 1

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(WorkloadError) as error:
        worker.run()
    assert "no authority" in refused(error)
    with pytest.raises(WorkloadError):
        worker.drain()
    # run() on the main thread installed its signal handlers and put the old ones back.
    assert {sig: signal.getsignal(sig) for sig in before} == before
