"""The CPU cost of checking what a request brings: a submission's document and fields, and
a bearer token. Pure functions, no store: microseconds per call, median of rounds.

What it times, per call:
- ``document``: the secret, depth and Unicode check of a typical input (60 keys, 3 levels,
  ~2 KB of JSON), ``feltdb.work.safety.ensure_safe``;
- ``admission``: ``validate_admission`` of the fixture request with that input (every bound
  and secret check of a submission);
- ``token``: ``Keyring.verify`` of a bearer token (decode, HMAC, validity).

Usage: python bench/bench_input_checks.py [--rounds 7] [--calls 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import make_request

from feltdb import Subject
from feltdb.auth.policy import ALL_CAPABILITIES, application_grant
from feltdb.auth.tokens import Keyring
from feltdb.work.admission import validate_admission
from feltdb.work.safety import ensure_safe


def typical_input() -> dict[str, Any]:
    """About 2 KB of JSON: 20 records of three fields, some nested."""
    return {
        f"item_{n}": {
            "name": f"customer {n}",
            "email": f"user{n}@example.com",
            "lines": [{"sku": f"SKU-{n}-{m}", "qty": m, "price": 9.99} for m in range(2)],
        }
        for n in range(20)
    }


def per_call_us(call: Callable[[], Any], calls: int, rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        timings.append((time.perf_counter() - started) / calls * 1e6)
    return round(statistics.median(timings), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    document = typical_input()
    request = make_request(input=document)
    keyring = Keyring.generate()
    grant = application_grant(
        Subject.worker("w1"), "t", "app", ALL_CAPABILITIES, issued_at=0, expires_at=2**40
    )
    token = keyring.sign(grant)
    figures = {
        "document_us": per_call_us(lambda: ensure_safe(document, "input"), args.calls, args.rounds),
        "admission_us": per_call_us(lambda: validate_admission(request), args.calls, args.rounds),
        "token_us": per_call_us(lambda: keyring.verify(token, 1), args.calls, args.rounds),
        "input_bytes": len(json.dumps(document)),
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
