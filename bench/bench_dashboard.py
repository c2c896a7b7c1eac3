"""What the dashboard's pages cost, beside the API's answer to the same question, in one run.

On an embedded SQLite store (WAL, synchronous=FULL) holding N workloads taken through
their lifecycle (admit, claim, start, complete: four commits each, so about 4N log
entries) and N/10 more READY, it measures the median and p95 of:

- the store reads the pages make: ``summary`` (one GROUP BY), ``recent`` (the newest log
  entries, up to 20,000, their audit fields extracted by SQLite), ``audit_before`` (a page
  of the audit, newest first) and ``page`` (50 workloads);
- whole answers through the ASGI app in process (no sockets): ``GET /ui/``,
  ``GET /ui/workloads`` and a search (up to 2,000 workloads read) with a session cookie,
  against ``GET /v1/workloads`` with a token, so a page's price is seen next to the JSON
  the API answers for the same rows.

Usage: python bench/bench_dashboard.py [--workloads 2000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx
from support.factories import CAPABILITIES, make_request

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import ALL_CAPABILITIES, application_grant
from feltdb.auth.tokens import Keyring
from feltdb.server.app import create_app
from feltdb.server.ui import overview


def fill(store: WorkloadStore, workloads: int) -> None:
    """``workloads`` through to success, then a tenth as many left READY."""
    for n in range(workloads):
        store.create(make_request(idempotency_key=f"done-{n}", input={"n": n}))
        claim = store.claim_next("t", "app", "w", CAPABILITIES)
        assert claim is not None
        fence = (claim.workload_id, claim.claim_id, "w", claim.fencing_token)
        store.start(*fence)
        store.complete(*fence, f"r{n}", {"ok": n})
        if n % 500 == 499:
            print(f"  filled {n + 1}/{workloads}", flush=True)
    for n in range(workloads // 10):
        store.create(make_request(idempotency_key=f"ready-{n}", input={"n": n}))


def timed(rounds: int, call: Callable[[], Any]) -> dict[str, float]:
    call()  # warm: templates compiled, statements prepared
    spent = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1000)
    spent.sort()
    return {
        "median_ms": round(statistics.median(spent), 3),
        "p95_ms": round(spent[max(0, int(len(spent) * 0.95) - 1)], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/dashboard.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {"workloads": args.workloads, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp, WorkloadStore.open(Path(tmp) / "b.db") as store:
        print(f"filling {args.workloads} workloads", flush=True)
        fill(store, args.workloads)
        results["log_entries"] = store.db.current_revision()
        now = int(time.time())
        reads = {
            "summary": lambda: overview.summarize(store.db, "t", "app", None),
            "recent (last hour)": lambda: overview.recent(store.db, "t", "app", now),
            "audit_before (50)": lambda: store.audit.before("t", "app", limit=50),
            "page (50)": lambda: store.page("t", "app", limit=50),
        }
        for name, call in reads.items():
            results[name] = timed(args.rounds, call)
            print(f"{name:>22}: {results[name]}", flush=True)
        results.update(asyncio.run(answers(store, args.rounds)))
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


async def answers(store: WorkloadStore, rounds: int) -> dict[str, Any]:
    """The app's answers, in process: pages with a session, the API with a token."""
    ring = Keyring.generate()
    now = int(time.time())
    grant = application_grant(
        Subject.human("ada"), "t", "app", ALL_CAPABILITIES, issued_at=now - 1,
        expires_at=now + 3600,
    )  # fmt: skip
    token = ring.sign(grant)
    app = create_app(store, ring, maintenance_interval_s=None)
    transport = httpx.ASGITransport(app=app)
    measured: dict[str, Any] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        form = (await http.get("/ui/login")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf is not None
        signed = await http.post("/ui/login", data={"csrf": csrf[1], "token": token})
        assert signed.status_code == 303, signed.text
        paths = {
            "GET /ui/": ("/ui/", {}),
            "GET /ui/workloads (50 rows)": ("/ui/workloads", {}),
            "GET /ui/workloads?q= (search)": ("/ui/workloads?q=ready-1", {}),
            "GET /v1/workloads (50, JSON)": (
                "/v1/workloads",
                {"Authorization": f"Bearer {token}"},
            ),
        }
        for name, (path, headers) in paths.items():
            spent = []
            for _ in range(rounds + 1):
                started = time.perf_counter()
                answer = await http.get(path, headers=headers)
                spent.append((time.perf_counter() - started) * 1000)
                assert answer.status_code == 200, (path, answer.text[:300])
            spent = sorted(spent[1:])
            measured[name] = {
                "median_ms": round(statistics.median(spent), 3),
                "p95_ms": round(spent[max(0, int(len(spent) * 0.95) - 1)], 3),
                "bytes": len(answer.content),
            }
            print(f"{name:>22}: {measured[name]}", flush=True)
    return measured


if __name__ == "__main__":
    main()
