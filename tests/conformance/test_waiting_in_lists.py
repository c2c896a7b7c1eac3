"""A list tells what its ready work waits for (issue 25, point 3): work whose dependency is
not yet in the state it requires is not plain READY to whoever reads the list."""

from __future__ import annotations

from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadDependency, WorkloadState


def test_ready_work_names_the_first_dependency_it_waits_for(store):
    first = store.create(make_request(idempotency_key="first"))
    second = store.create(make_request(idempotency_key="second"))
    after_both = store.create(
        make_request(
            idempotency_key="after-both",
            dependencies=[
                WorkloadDependency(workload_id=first.workload_id),
                WorkloadDependency(workload_id=second.workload_id),
            ],
        )
    )

    def waiting() -> dict[str, WorkloadDependency | None]:
        page, _ = store.page("t", "app", limit=50)
        return {s.workload_id: s.waits_for for s in page}

    assert waiting() == {
        first.workload_id: None,
        second.workload_id: None,
        after_both.workload_id: WorkloadDependency(workload_id=first.workload_id),
    }
    for workload in (first, second):
        claim = store.claim(workload.workload_id, "w", CAPABILITIES, now=20)
        store.start(workload.workload_id, claim.claim_id, "w", claim.fencing_token, now=21)
        store.complete(
            workload.workload_id, claim.claim_id, "w", claim.fencing_token,
            f"r-{workload.workload_id}", {"ok": True}, now=22,
        )  # fmt: skip
        expected = (
            None if workload is second else WorkloadDependency(workload_id=second.workload_id)
        )
        assert waiting()[after_both.workload_id] == expected
    ready, _ = store.page("t", "app", state=WorkloadState.READY)
    assert [(s.workload_id, s.waits_for) for s in ready] == [(after_both.workload_id, None)]
