"""A worker run under a supervisor: ``/healthz`` served (:class:`HealthServer`) and, under
systemd, readiness and watchdog notifications (:class:`SystemdNotifier`), both judged by
the worker's :class:`~feltdb.worker.health.Pulse`.

systemd's notification protocol, as ``sd_notify(3)`` sends it: one datagram of
``KEY=VALUE`` lines to the unix socket ``$NOTIFY_SOCKET`` (a leading ``@``: the abstract
namespace). ``$WATCHDOG_USEC`` asks for ``WATCHDOG=1`` at least that often; when
``$WATCHDOG_PID`` names another process, the watchdog is not this one's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from feltdb.worker.health import HealthServer, Pulse, check_bound

if TYPE_CHECKING:
    from feltdb.worker.runtime import Worker

log = logging.getLogger("feltdb.worker")

NOTIFY_TICK_S = 0.25
"""How often the notifier looks at the pulse."""


class SystemdNotifier:
    """Tells systemd, through the socket at ``address``, that the worker is ready (its
    first claim reached the authority), alive (``WATCHDOG=1`` every ``watchdog_s / 2``
    while healthy; ``None``: no watchdog) and stopping; on a daemon thread from
    :meth:`start` until :meth:`close`.
    """

    def __init__(
        self, address: str, watchdog_s: float | None, pulse: Pulse, unhealthy_after_s: float
    ) -> None:
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self.watchdog_s = watchdog_s
        """The watchdog's period in seconds (``None``: systemd asked for none)."""
        self._pulse = pulse
        self._unhealthy_after_s = unhealthy_after_s
        self._closed = threading.Event()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._thread = threading.Thread(target=self._run, name="feltdb-sd-notify", daemon=True)

    @classmethod
    def from_environment(cls, pulse: Pulse, unhealthy_after_s: float) -> SystemdNotifier | None:
        """The notifier ``$NOTIFY_SOCKET`` asks for, else ``None`` (not under systemd)."""
        address = os.environ.get("NOTIFY_SOCKET")
        if not address:
            return None
        watchdog_s = None
        usec, pid = os.environ.get("WATCHDOG_USEC", ""), os.environ.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            watchdog_s = int(usec) / 1_000_000
        return cls(address, watchdog_s, pulse, unhealthy_after_s)

    def start(self) -> None:
        """Notify on a daemon thread."""
        self._thread.start()

    def close(self) -> None:
        """Stop notifying (having said ``STOPPING=1`` if the worker ran)."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._socket.close()

    def send(self, message: str) -> None:
        """One notification; a failure is logged, never raised (systemd may be gone)."""
        try:
            self._socket.sendto(message.encode(), self._address)
        except OSError as error:
            log.warning("cannot notify systemd at %s: %s", self._address.lstrip("\0"), error)

    def _run(self) -> None:
        ready = stopping = False
        next_beat = 0.0
        while not self._closed.wait(NOTIFY_TICK_S):
            if not ready and self._pulse.ever_reached:
                self.send("READY=1\nSTATUS=claiming work")
                ready = True
            if self._pulse.stopping and not stopping:
                self.send("STOPPING=1\nSTATUS=stopping: running handlers finish")
                stopping = True
            healthy = self._pulse.verdict(self._unhealthy_after_s) is None
            if self.watchdog_s and ready and healthy and time.monotonic() >= next_beat:
                self.send("WATCHDOG=1")
                next_beat = time.monotonic() + self.watchdog_s / 2
        if ready and not stopping:
            self.send("STOPPING=1")


class Supervision:
    """While a ``with`` block runs ``worker``: ``/healthz`` on ``health_host:health_port``
    (none when the port is ``None``), and systemd notified when ``$NOTIFY_SOCKET`` is set.
    The port is bound at construction, so a port in use is said before the worker starts.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``, with ``/healthz`` served or under systemd,
            ``unhealthy_after_s`` is not longer than the worker's long-poll and a margin
            (:func:`~feltdb.worker.health.check_bound`); unused, any bound is taken.
        OSError: the health port cannot be listened on.
    """

    def __init__(
        self, worker: Worker, health_host: str, health_port: int | None, unhealthy_after_s: float
    ) -> None:
        if health_port is not None or os.environ.get("NOTIFY_SOCKET"):
            check_bound(unhealthy_after_s, worker.poll_wait_s)
        verdict = lambda: worker.pulse.verdict(unhealthy_after_s)  # noqa: E731
        self.host = health_host
        self.server = (
            None if health_port is None else HealthServer(health_host, health_port, verdict)
        )
        self.notifier = SystemdNotifier.from_environment(worker.pulse, unhealthy_after_s)

    def __enter__(self) -> Supervision:
        if self.server is not None:
            self.server.start()
            log.info("health: GET http://%s:%d/healthz", self.host, self.server.port)
        if self.notifier is not None:
            self.notifier.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.notifier is not None:
            self.notifier.close()
        if self.server is not None:
            self.server.close()
