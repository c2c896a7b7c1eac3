"""The wake-up hints a backend may carry between the processes sharing its database: the
:class:`Wakeups` of :attr:`Database.wakeups <feltdb.storage.base.Database.wakeups>`.
PostgreSQL's are :mod:`feltdb.storage.postgres_wakeups`; SQLite has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Wakeups"]


class Wakeups(Protocol):
    """Wake-up hints between the processes that share one database: a commit that may
    have made work claimable is announced, and every subscriber of every process is called
    soon after. A hint only: one may be lost (a connection drops), so a waiter still looks
    again on its own from time to time; and one may come when nothing is claimable.
    """

    @property
    def received(self) -> int:
        """How many hints of the other processes this one has received."""
        ...

    def announce(self) -> None:
        """Tell every subscriber that work may have become claimable. Quick and safe from
        any thread: it never waits for the database and never raises. Announcements close
        together may be merged into one, but while the database is open one is always
        sent after the last.
        """
        ...

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from a background thread; it must be quick) after each
        announcement of every other process (and once whenever a hint may have been lost,
        a connection opened again); answers the function that unsubscribes it.
        """
        ...
