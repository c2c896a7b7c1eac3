"""The ``feltdb worker`` options of its health endpoint (:mod:`feltdb.worker.health`)."""

from __future__ import annotations

from typing import Annotated

import typer

from feltdb.limits import MAX_UNHEALTHY_AFTER_S

HealthPortOption = Annotated[
    int | None,
    typer.Option(
        envvar="FELTDB_HEALTH_PORT",
        min=0,
        max=65535,
        help="Serve GET /healthz on this port (0: a free one, logged): 200 while the "
        "worker claims and reaches its authority, 503 with the reason otherwise (not yet "
        "claiming, stopping after SIGTERM, its claims and heartbeats failing to reach the "
        "authority, its claim loop stuck, or every handler slot held by a handler told to "
        "stop that does not return, for longer than --unhealthy-after). Default: not served.",
    ),
]
HealthHostOption = Annotated[
    str,
    typer.Option(
        envvar="FELTDB_HEALTH_HOST",
        help="The address /healthz listens on: loopback by default; 0.0.0.0 for a probe "
        "from outside the host or container (a Kubernetes httpGet probe).",
    ),
]
UnhealthyAfterOption = Annotated[
    float,
    typer.Option(
        envvar="FELTDB_UNHEALTHY_AFTER",
        min=1,
        max=MAX_UNHEALTHY_AFTER_S,
        help="Seconds the authority may go unreached (or the claim loop without a pass) "
        "before /healthz answers 503 and systemd's watchdog is no longer fed; more than the "
        "Worker's poll_wait_s (2 s by default) and 5 s, else refused (when /healthz is "
        "served or systemd watches).",
    ),
]
