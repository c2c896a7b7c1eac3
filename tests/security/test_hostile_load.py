"""Hostile load against a real ``feltdb serve`` (issue 24): what an authenticated but
hostile client sends to make the server hold memory it never gives back.

These attacks touch no storage (each request is refused before it reaches the store), so
they run against one server on a SQLite file of their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from support.server import Server, submission


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid``, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def test_refused_submissions_with_huge_keys_pin_no_memory(lone_server: Server) -> None:
    headers = lone_server.headers("app")
    with httpx.Client(base_url=lone_server.url, timeout=30) as http:
        # Warm up: the first requests load what every later one uses.
        for n in range(5):
            http.post("/v1/workloads", json=submission(f"warm-{n}"), headers=headers)
        before = rss_mib(lone_server.process.pid)
        attacks = 150
        for n in range(attacks):
            key = f"{n:06d}" + "k" * 1_000_000  # about 1 MB: a distinct key each time
            answer = http.post(
                "/v1/workloads", json=submission(f"huge-{n}", input={key: 1}), headers=headers
            )
            assert answer.status_code == 422, answer.text[:300]
            assert "over the limit of 1,024" in answer.json()["error"]["message"]
        grown = rss_mib(lone_server.process.pid) - before
        # Before the bound, the secret-key cache kept every key: about 1 MB a request.
        assert grown < attacks / 3, f"the server grew {grown:.0f} MiB over {attacks} refusals"
        assert http.get("/healthz").status_code == 200


def test_checkpoints_cannot_grow_a_record_past_its_bound(lone_server: Server) -> None:
    from support.server import WORK_CAPABILITY

    from feltdb import Subject
    from feltdb.auth.policy import CLAIM

    submitter = lone_server.headers("bounds")
    worker = lone_server.headers(
        "bounds", subject=Subject.worker("w"), capabilities={CLAIM, WORK_CAPABILITY}
    )
    with httpx.Client(base_url=lone_server.url, timeout=60) as http:
        created = http.post("/v1/workloads", json=submission("big"), headers=submitter)
        workload_id = created.json()["workload_id"]
        claim = http.post("/v1/claims", json={}, headers=worker).json()
        fence = {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}
        path = f"/v1/workloads/{workload_id}"
        assert http.post(f"{path}/start", json=fence, headers=worker).status_code == 204
        statuses = []
        for _ in range(12):
            body = {**fence, "state": {"blob": "x" * (1024 * 1024 - 256)}}
            statuses.append(http.post(f"{path}/checkpoint", json=body, headers=worker))
        codes = [answer.status_code for answer in statuses]
        assert codes[:6] == [200] * 6 and codes[-1] == 422, codes
        refusal = statuses[-1].json()["error"]
        assert "over the limit of 8,388,608" in refusal["message"]
        read = http.get(path, headers=submitter)
        assert read.status_code == 200
        assert len(read.content) < 9 * 1024 * 1024


def _wide_input(n: int) -> dict[str, int]:
    """Nearly 1 MiB of JSON in 50,000 small keys: a document costly to decode."""
    return {f"k{n:02d}{i:06d}": i for i in range(50_000)}


def test_a_list_page_of_huge_records_stays_within_its_bound(lone_server: Server) -> None:
    headers = lone_server.headers("wide")
    with httpx.Client(base_url=lone_server.url, timeout=120) as http:
        for n in range(12):
            body = json.dumps(submission(f"wide-{n}", input=_wide_input(n)), separators=(",", ":"))
            answer = http.post(
                "/v1/workloads",
                content=body,
                headers={**headers, "Content-Type": "application/json"},
            )
            assert answer.status_code == 201, answer.text[:300]
        before = rss_mib(lone_server.process.pid)
        first = http.get("/v1/workloads", params={"limit": 500}, headers=headers)
        grown = rss_mib(lone_server.process.pid) - before
        assert first.status_code == 200
        page = first.json()
        # A page reads at most 4 MiB of stored records past its first (the bound), and says
        # where to go on; it answers summaries, so the page is kilobytes, not megabytes.
        assert 1 <= len(page["items"]) < 12 and page["next_cursor"] is not None
        assert len(first.content) < 2_000 * len(page["items"]), len(first.content)
        for item in page["items"]:
            assert "input" not in item and "execution_history" not in item
            assert len(item["input_preview"]) == 500 and item["input_chars"] > 800_000
        assert grown < 200, f"one page grew the server {grown:.0f} MiB"
        whole = http.get(f"/v1/workloads/{page['items'][0]['workload_id']}", headers=headers)
        assert len(whole.json()["input"]) == 50_000, "one workload's read answers its input"
        seen = [w["workload_id"] for w in page["items"]]
        cursor = page["next_cursor"]
        while cursor is not None:
            more = http.get(
                "/v1/workloads", params={"limit": 500, "cursor": cursor}, headers=headers
            ).json()
            seen += [w["workload_id"] for w in more["items"]]
            cursor = more["next_cursor"]
        assert len(set(seen)) == 12, "following the cursor reaches every workload once"
        assert http.get("/healthz", timeout=2).status_code == 200
