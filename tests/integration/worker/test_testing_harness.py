"""feltdb.testing: a worker author's tests run the real runtime on a real, throwaway store."""

from __future__ import annotations

from typing import Any

from feltdb.records.workload import WorkloadRetryPolicy
from feltdb.testing import WorkerTestEnvironment
from feltdb.worker import Context, Permanent, Worker


def build_worker() -> Worker:
    worker = Worker(url="http://unused.invalid", token="not-used", capabilities={"email:send"})

    @worker.handler("send-email")
    def send(ctx: Context) -> Any:
        if not ctx.input.get("to"):
            raise Permanent("no recipient")
        if ctx.last_checkpoint is None:
            ctx.checkpoint({"step": "rendered"})
            if ctx.input.get("flaky"):
                raise ConnectionError("smtp reset")
        return {"sent_to": ctx.input["to"], "attempt": ctx.attempt}

    return worker


def test_a_handler_runs_through_the_real_runtime_and_its_history_is_committed() -> None:
    worker = build_worker()
    with WorkerTestEnvironment() as env:
        sent = env.submit("send-email", {"to": "ada@example.com"}, capabilities={"email:send"})
        assert env.run(worker) == 1
        done = env.get(sent.workload_id)
        assert done.result is not None
        assert done.result.output == {"sent_to": "ada@example.com", "attempt": 1}
        assert env.states(sent.workload_id) == [
            "READY",
            "CLAIMED",
            "RUNNING",
            "CHECKPOINTED",
            "SUCCEEDED",
        ]
    # The worker's own authority is put back after the run.
    assert worker.url == "http://unused.invalid" and worker.store is None


def test_what_submit_answered_names_the_workload_to_get() -> None:
    # Issue 25: get() once refused the Workload that submit() answered.
    with WorkerTestEnvironment() as env:
        sent = env.submit("send-email", {"to": "ada@example.com"})
        assert env.get(sent) == env.get(sent.workload_id)
        assert env.states(sent) == ["READY"]


def test_failures_retries_and_resumption_are_the_authoritys() -> None:
    worker = build_worker()
    with WorkerTestEnvironment() as env:
        retried = env.submit(
            "send-email",
            {"to": "bob@example.com", "flaky": True},
            retry_policy=WorkloadRetryPolicy(initial_delay_ms=0),
        )
        refused = env.submit("send-email", {})
        assert env.run(worker) == 3
        w = env.get(retried.workload_id)
        # The first attempt checkpointed then failed; the second resumed past the step.
        assert w.result is not None and w.result.output["attempt"] == 2
        assert "FAILED" in env.states(retried.workload_id)
        assert env.get(refused.workload_id).state.value == "DEAD_LETTER"
        assert env.get(refused.workload_id).last_failure == "permanent: no recipient"


def test_the_store_is_deleted_when_the_environment_closes() -> None:
    env = WorkerTestEnvironment()
    env.submit("send-email", {"to": "x"})
    assert (env.directory / "work.db").exists()
    env.close()
    assert not env.directory.exists()


def always_unknown_worker() -> Worker:
    worker = Worker(url="http://unused.invalid", token="not-used")

    @worker.handler("charge")
    def charge(ctx: Context) -> Any:
        ctx.mark_side_effect()  # from here, a crash means "effect unknown"
        raise RuntimeError("card network timed out")

    return worker


def test_run_waits_out_retry_backoff_on_its_own_clock() -> None:
    worker = build_worker()
    with WorkerTestEnvironment() as env:
        started = env.now
        # The default policy: a second of backoff, doubling, three attempts in all.
        retried = env.submit("send-email", {"to": "bob@example.com", "flaky": True})
        assert env.run(worker, retries=False) == 1  # the retry is not due yet
        assert env.get(retried.workload_id).state.value == "READY"
        assert env.run(worker) == 1  # the clock moves to it
        assert env.get(retried.workload_id).state.value == "SUCCEEDED"
        assert env.now >= started + 1


def test_unknown_effect_is_retried_by_the_default_policy_and_not_without_worker_failure() -> None:
    worker = always_unknown_worker()
    with WorkerTestEnvironment() as env:
        default = env.submit("charge", {"amount": 5})
        strict = env.submit(
            "charge", {"amount": 5}, retry_policy=WorkloadRetryPolicy(retry_on={"timeout"})
        )
        assert env.run(worker) == 4  # three attempts of the first, one of the second
        assert len(env.get(default.workload_id).attempts) == 3
        assert env.get(default.workload_id).state.value == "DEAD_LETTER"
        assert len(env.get(strict.workload_id).attempts) == 1
        assert env.get(strict.workload_id).state.value == "DEAD_LETTER"
