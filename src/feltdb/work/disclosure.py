"""What a reader is shown of a workload: everything but the signature of its evidence.

A workload keeps the signed grant it was admitted under (``authorization_snapshot``), as
the reference does: evidence of who asked and under which grant, which the server can
verify. Its signature is an evidence signature, which never verifies as a bearer token
(:mod:`feltdb.auth.signing`), and it is still withheld from every answer to a reader (the HTTP
API, the ``feltdb`` command's JSON and tables), replaced by :data:`REDACTED`: nothing a reader
receives is a credential, nor material to attack one with.
"""

from __future__ import annotations

from typing import Any

from feltdb.records.workload import Workload

REDACTED = "redacted"
"""What an answer shows in place of the snapshot's signature."""


def disclosed(workload: Workload) -> dict[str, Any]:
    """``workload`` as JSON for a reader: :meth:`Workload.to_json` with the snapshot's signature
    replaced by :data:`REDACTED` (the grant, its id and the key id stay visible).
    """
    document = workload.to_json()
    snapshot = document.get("authorization_snapshot")
    if isinstance(snapshot, dict):
        document["authorization_snapshot"] = {**snapshot, "signature": REDACTED}
    return document
