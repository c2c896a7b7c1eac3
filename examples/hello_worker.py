"""A sample worker: sends (pretend) emails, checkpointing between its two steps.

Run it against a server::

    feltdb worker examples.hello_worker:worker --url http://127.0.0.1:8700 --token "$TOKEN"

or on a store directly, with no server::

    feltdb worker examples.hello_worker:worker --db feltdb.sqlite3

Its token needs ``workload:claim`` and ``email:send`` (the capability its work requires).
"""

from __future__ import annotations

import time
from typing import Any

from feltdb.worker import Context, Permanent, Worker

worker = Worker(capabilities={"email:send"}, concurrency=4)


@worker.handler("send-email")
def send_email(ctx: Context) -> dict[str, Any]:
    """Render, then send; a retry after the render resumes from its checkpoint."""
    to = ctx.input.get("to") if isinstance(ctx.input, dict) else None
    if not to:
        raise Permanent("the input names no recipient ('to')", kind="invalid_input")
    if ctx.last_checkpoint is None:
        time.sleep(0.3)  # rendering takes a moment
        ctx.checkpoint({"step": "rendered", "to": to})
    if ctx.cancelled.is_set():
        return {}
    ctx.mark_side_effect()  # from here a crash may have sent the email
    time.sleep(0.3)
    return {"sent_to": to, "attempt": ctx.attempt}
