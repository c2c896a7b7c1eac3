"""Without OpenTelemetry, nothing of it is imported: a process that cannot import it (the
``otel`` extra missing), or that never imported it itself (installed, but not used), runs
work through the store, a LocalClient and the worker runtime without loading any of it,
and keeps no trace context with the work.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
if sys.argv[1] == "missing":
    sys.modules["opentelemetry"] = None  # as if the extra were not installed
from feltdb import tracing
from feltdb.testing import WorkerTestEnvironment
from feltdb.worker import Worker

worker = Worker()

@worker.handler("send")
def send(ctx):
    ctx.checkpoint({"step": 1})
    return {"sent": 1}

with WorkerTestEnvironment() as env:
    submitted = env.submit("send", {"n": 1})
    assert env.run(worker) == 1
    done = env.get(submitted.workload_id)
    assert done.state.value == "SUCCEEDED" and done.trace_context is None
# What the HTTP client calls for each request and each submission.
assert tracing.inject_headers({}) == {} and tracing.with_trace_context({}) == {}
assert tracing.tracer() is None and tracing.current_trace_context() is None
print(sorted(name for name, module in sys.modules.items()
             if name.startswith("opentelemetry") and module is not None))
"""


@pytest.mark.parametrize("otel", ["missing", "unused"])
def test_work_runs_without_importing_opentelemetry(otel: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, otel], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout
