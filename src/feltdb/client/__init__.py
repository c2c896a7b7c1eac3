"""An HTTP client of ``feltdb serve``: :class:`Client`, with the operations of
:class:`~feltdb.work.store.WorkloadStore` the server offers.
"""

from feltdb.client.http import AuditPage, Client, ClientError, Page

__all__ = ["AuditPage", "Client", "ClientError", "Page"]
