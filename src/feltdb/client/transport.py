"""What the HTTP client's mixins (:mod:`~feltdb.client.http_batches`,
:mod:`~feltdb.client.http_audit`) call: the transport of :class:`~feltdb.client.Client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Transport:
    """One request to the server, answered as its JSON document (``Client`` implements
    it: the token, the timeout, and every refusal raised as a ``ClientError``).
    """

    timeout: float
    """Each request's bound in seconds (a long-poll's ``wait_ms`` is added to it)."""

    def _ask(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError  # the client's transport
