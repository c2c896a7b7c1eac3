"""The worker SDK: write a handler, and the runtime claims, heartbeats and reports.

>>> from feltdb.worker import Worker, Retryable, Permanent
>>> worker = Worker("http://127.0.0.1:8700", token="fgt2.…", capabilities={"email:send"})
>>> @worker.handler("send-email")
... def send(ctx):
...     return {"sent": 1}

See :class:`Worker` (the runtime), :class:`Context` (what a handler is given),
:class:`Retryable` and :class:`Permanent` (failures a handler names).
"""

from feltdb.worker.context import Context
from feltdb.worker.failures import LeaseLost, Permanent, Retryable
from feltdb.worker.runtime import Worker, heartbeat_interval_s

__all__ = ["Context", "LeaseLost", "Permanent", "Retryable", "Worker", "heartbeat_interval_s"]
