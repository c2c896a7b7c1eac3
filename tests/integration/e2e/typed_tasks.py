"""The typed definitions the typed end-to-end test serves in a real ``feltdb worker``
process, and submits through a real ``Client``: one of pydantic models (a sync handler),
one of msgspec Structs (an ``async`` handler).
"""

from __future__ import annotations

import msgspec
from pydantic import BaseModel

from feltdb import Definition
from feltdb.worker import Context, Worker


class EmailIn(BaseModel):
    to: str
    subject: str = "hello"


class EmailOut(BaseModel):
    message_id: str
    accepted: bool


class InvoiceIn(msgspec.Struct):
    invoice: int


class InvoiceOut(msgspec.Struct):
    total: int


send_email = Definition(
    "send-email", input=EmailIn, output=EmailOut, capabilities={"email:send"},
    retry_policy={"max_attempts": 1},
)  # fmt: skip
total_invoice = Definition(
    "total-invoice", input=InvoiceIn, output=InvoiceOut, capabilities={"email:send"},
    retry_policy={"max_attempts": 1},
)  # fmt: skip

worker = Worker(capabilities={"email:send"}, concurrency=2, poll_wait_s=1.0)


@worker.handler(send_email)
def send(ctx: Context, email: EmailIn) -> EmailOut:
    if email.to.endswith("@broken.example"):
        # A bug in the handler: the output lacks a field of its model.
        return {"message_id": f"<{email.subject}@{email.to}>"}  # type: ignore[return-value]
    return EmailOut(message_id=f"<{email.subject}@{email.to}>", accepted=True)


@worker.handler(total_invoice)
async def total(ctx: Context, invoice: InvoiceIn) -> InvoiceOut:
    return InvoiceOut(total=invoice.invoice * 100)
