"""The attempt threads (feltdb.worker.threads): at most one per handler slot, reused from
attempt to attempt, each named for the workload it runs, all ended with the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from feltdb.worker.threads import AttemptThreads


def attempt(n: int) -> Any:
    return SimpleNamespace(workload_id=f"w{n}")


def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_attempts_reuse_at_most_size_threads_each_named_for_its_workload() -> None:
    seen: dict[str, tuple[threading.Thread, str]] = {}  # the threads themselves: kept alive
    running = threading.Semaphore(2)  # what the runtime's slots guarantee: 2 at most
    lock = threading.Lock()

    def run(job: Any) -> None:
        with lock:
            current = threading.current_thread()
            seen[job.workload_id] = (current, current.name)
        running.release()

    pool = AttemptThreads(2, run)
    for n in range(200):
        running.acquire()
        pool.submit(attempt(n))
    wait_until(lambda: len(seen) == 200)
    assert {name for _, name in seen.values()} == {f"feltdb-attempt-w{n}" for n in range(200)}
    assert len({id(thread) for thread, _ in seen.values()}) <= 2
    pool.close()
    wait_until(lambda: not any(t.name.startswith("feltdb-attempt") for t in threading.enumerate()))


def test_a_thread_still_running_at_close_ends_after_its_attempt() -> None:
    release, started = threading.Event(), threading.Event()
    ran_on: list[threading.Thread] = []

    def run(job: Any) -> None:
        ran_on.append(threading.current_thread())
        started.set()
        release.wait(5)

    pool = AttemptThreads(3, run)
    pool.submit(attempt(1))
    assert started.wait(5)
    pool.close()
    [thread] = ran_on
    assert thread.is_alive() and thread.name == "feltdb-attempt-w1", "close waits for no one"
    release.set()
    thread.join(5)
    assert not thread.is_alive(), "its attempt done, the closed pool's thread ends"


@pytest.mark.parametrize("failure", [RuntimeError("the runtime's own"), SystemExit(3)])
def test_a_failing_attempt_leaves_its_thread_serving(failure: BaseException) -> None:
    done: list[threading.Thread] = []

    def run(job: Any) -> None:
        if job.workload_id == "w0":
            raise failure
        done.append(threading.current_thread())

    pool = AttemptThreads(1, run)
    for n in range(3):
        pool.submit(attempt(n))
    wait_until(lambda: len(done) == 2)
    assert len({id(thread) for thread in done}) == 1
    pool.close()


def test_the_rest_of_an_attempt_runs_on_a_pool_thread_or_its_own_once_closed() -> None:
    # A completion refused after its thread went back to the pool is decided later, named
    # for its workload; after close (a shutdown) it still runs, on a thread of its own.
    ran: list[tuple[str, str]] = []
    done = threading.Event()

    def rest(tag: str) -> None:
        ran.append((tag, threading.current_thread().name))
        done.set()

    pool = AttemptThreads(1, lambda job: None)
    pool.later(attempt(7), lambda: rest("pooled"))
    assert done.wait(5)
    done.clear()
    pool.close()
    pool.later(attempt(8), lambda: rest("closed"))
    assert done.wait(5)
    assert ran == [("pooled", "feltdb-attempt-w7"), ("closed", "feltdb-attempt-w8")]


def _hand_over_while_closing(size: int, jobs: int) -> list[int]:
    pool = AttemptThreads(size, lambda job: None)
    ran: list[int] = []
    lock = threading.Lock()

    def job(n: int) -> Callable[[], None]:
        def run() -> None:
            with lock:
                ran.append(n)

        return run

    def hand_over() -> None:
        for n in range(jobs):
            pool.later(attempt(n), job(n))

    handing = threading.Thread(target=hand_over)
    handing.start()
    pool.close()
    handing.join(5)
    wait_until(lambda: len(ran) == jobs)
    return ran


def test_a_job_handed_over_while_the_pool_closes_still_runs() -> None:
    # The completer hands jobs over while the claim loop's thread closes the pool: none may
    # be queued behind the stop marks, where no thread would ever take it.
    for _ in range(20):
        assert sorted(_hand_over_while_closing(4, 200)) == list(range(200))
