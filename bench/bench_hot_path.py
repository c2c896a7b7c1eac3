"""The cost of each operation on the hot path, on embedded SQLite (WAL, synchronous=FULL).

Each worker-facing call is one keyed read and one guarded, fsync'd commit; ``get`` is one
keyed read. Reports the median and p95 over N workloads taken through the whole lifecycle.

Usage: python bench/bench_hot_path.py [--workloads 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=300)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/hot_path.json"))
    args = parser.parse_args()
    timings: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        answer = call(*args, **kwargs)
        timings[name].append((time.perf_counter() - started) * 1000)
        return answer

    with tempfile.TemporaryDirectory() as tmp, WorkloadStore.open(Path(tmp) / "b.db") as store:
        for n in range(args.workloads):
            request = make_request(idempotency_key=f"k{n}", input={"n": n})
            wid = timed("admit", store.create, request).workload_id
            timed("get", store.get, wid)
            c = timed("claim", store.claim, wid, "w", CAPABILITIES, now=11)
            fence = (wid, c.claim_id, "w", c.fencing_token)
            timed("start", store.start, *fence, now=12)
            timed("heartbeat", store.heartbeat, *fence, now=13)
            timed("checkpoint", store.checkpoint, *fence, {"step": 1}, now=14)
            timed("complete", store.complete, *fence, f"r{n}", {"ok": n}, now=15)
        result = {}
        for name, ms in timings.items():
            ms.sort()
            result[name] = {
                "median_ms": round(statistics.median(ms), 3),
                "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 3),
            }
            print(
                f"{name:<11} median {result[name]['median_ms']:7.3f} ms   "
                f"p95 {result[name]['p95_ms']:7.3f} ms"
            )
    Path(args.out).write_text(
        json.dumps({"workloads": args.workloads, "ops": result}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
