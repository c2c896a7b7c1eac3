"""Issue 13, security regressions in the soak: a seeded, randomized attack on a real
``feltdb serve`` process (one per backend, :mod:`support.server_fixtures`), over every
operation of the server's own ``/openapi.json`` (:mod:`support.secsoak_openapi` builds each
request from the operation's declared schema), so an endpoint added later is attacked
without editing this file.

Each round builds a new world of random tenants and applications: names that are prefixes
of each other, the same application name in every tenant, names that differ only by case,
by a trailing space or by Unicode normalization (NFC and NFD), names holding ``:``, ``/``,
``*`` and non-ASCII. Each application has an administrator, a requester, a worker (named
alike in every tenant) and work in every state the API reaches without waiting (``READY``,
``CLAIMED``, ``RUNNING`` with a checkpoint, ``CANCELLATION_REQUESTED``, ``SUCCEEDED``,
``DEAD_LETTER``, ``AWAITING_APPROVAL``), its inputs, checkpoints and outputs marked. Then:

- **secret material**: the application's own tokens, a ``Bearer`` credential, provider
  keys, a private-key block and secret-named keys, placed in inputs, idempotency keys,
  sessions, checkpoint states, outputs, result ids, failure kinds and errors, decision and
  retry reasons and batch items, are each refused ``422`` (per item in a batch), echoed
  nowhere, changing nothing. A signing key, which no rule can tell from data (the server's
  real one in the first application so treated, one of the same shape in the others; in
  base64url, in hex, and its keyring document), may be admitted in an input or a
  checkpoint state, and may then appear only there, only to that application;
- **revocation**: a token the server has just verified (and remembers) is revoked through
  the API; every operation then refuses it ``403``;
- **isolation**, for every operation: tokens of other tenants, of other applications of
  the tenant, of the same application name in another tenant, and of the same application
  constrained to other environments or definitions, with random capabilities, resource
  globs (``flow://*``, the victim's application's, the victim's workload's own URI) and
  subjects (the victim's worker's name included), send the request the schema describes,
  filled with the victim's real ids, claim ids, fencing tokens, input hashes, a list cursor
  forged to point into the victim's work, and the victim administrator's grant id to
  revoke. A request naming the victim's work must be refused (``403``, ``404``, ``422``,
  or a batch each of whose items is refused) in the very words, but for the id, that
  refuse it for a workload that does not exist (under a token naming that one, where the
  grant named the victim's); no answer shows anything of the victim's (the ledger, below);
  the victim's workloads, read from the store behind the server's back, are unchanged;
  and its administrator's token still works;
- **credentials**, for every operation: tokens made from the victim administrator's grant
  that must not work: forged (another secret under the same key id, an unknown key),
  expired (also at the instant of expiry, and once after the server verified and
  remembered it), not yet valid, suspended, of status ``revoked``, each claim tampered
  after signing (tenant, application, subject, expiry, capabilities, resources, key id),
  a spliced signature, a workload's evidence presented as a token, and malformed ones (no
  header, another scheme, garbage, wrong or retired prefix, truncated, not base64url, not
  JSON, bad signature shapes). Each answers as the README's error table says: ``401`` with
  ``WWW-Authenticate: Bearer`` for no token or one that cannot be decoded, ``403`` for one
  that decodes but does not verify (expired and revoked included), both
  ``WORKLOAD_UNAUTHORIZED``; nothing changes;
- **wrong scope**, for every operation: valid tokens of the victim's own application with
  no capability, or with resources that cover none of its work (another application's
  glob, or the right glob under a ``secret``, ``connection`` or ``audit`` scope), are
  refused ``403`` (per item in a batch); nothing changes;
- **approval**: random policies (kinds, listed approvers, requesters who are people or
  services) and random deciders (every subject kind, the requester itself, unlisted people,
  an agent named as a listed person, grants without ``workload:approve`` or not covering
  the work) decide, before and after a permitted decision. Each forbidden decider is
  refused ``403`` (``WORKLOAD_UNAUTHORIZED``, ``WORKLOAD_APPROVER_NOT_PERMITTED``), each
  permitted one decides, replays or is told ``WORKLOAD_APPROVAL_DECIDED``, and the store
  holds the first permitted decision or none.

Every answer of every request (setup included) goes through :class:`~support.secsoak_ledger.
Ledger`: any token-shaped text, token signature, signing key or refused secret in any
answer; any marker, workload id or revoked grant id of a scope the caller's grant does not
admit (in any answer, and in any ``401``/``403`` at all); any object naming another tenant;
and any 5xx fails the run. ``/metrics`` is read (without a token) and the server's log
scanned the same way after each round.

Size: ``scaled(1, 12)`` rounds of at most ``scaled(2, 3)`` tenants, ``scaled(3, 6)``
outsiders per operation and victim, and half of the (operation, bad token) pairs per round
in the bounded run (all in the soak). The figures are recorded as ``record("security",
"isolation-and-credentials", backend, requests=..., refused_as_expected=..., leaks=...,
cross_tenant_reads=..., changed=..., unexpected=..., ...)``; every bad count must be zero.
The seed is printed and named in every failure; ``FELTDB_SECURITY_SEED`` replays one.

What is NOT covered: timing side channels; concurrent attackers (requests are
sequential); tokens over the header size uvicorn accepts; key rotation (the server has
one key); revocation committed elsewhere than through this server's route (its 1 s bound);
query parameters other than ``limit``, ``cursor`` and ``after`` (the rest keep their
defaults); what headers other than a 401's ``WWW-Authenticate`` say (they are only
scanned for credentials); and whether a refusal's status is the best one where the README
allows two (``403`` or ``404``), beyond its being the same for missing work.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
from support.secsoak_ledger import Ledger, Owner, view_of
from support.secsoak_openapi import OBJECT, Operation, body_of, operations
from support.secsoak_tokens import UNDECODABLE, BadToken, bad_tokens
from support.server import WORK_CAPABILITY, Server, submission
from support.server_fixtures import backend, http, server
from support.soak import record, scaled

from feltdb import Grant, GrantConstraints, ResourceScope, ResourceScopeKind, Subject, WorkloadStore
from feltdb.auth.policy import ALL_CAPABILITIES, APPROVE, READ, SUBMIT, application_grant
from feltdb.auth.tokens import Keyring

__all__ = ["backend", "http", "server"]

SEED = int(os.environ.get("FELTDB_SECURITY_SEED") or secrets.randbits(32))
ROUNDS = scaled(1, 12)
OUTSIDERS_PER_OPERATION = scaled(3, 6)
"""Outsider tokens that attack each operation of each victim, per round."""
TENANTS = scaled(2, 3)
"""At most this many tenants a round (each with one or two applications)."""
BAD_TOKEN_SHARE = scaled(2, 1)
"""One (operation, bad token) pair in this many is sent each round."""
LEASE_MS = 3_600_000
"""The soak's leases: an hour, so the maintenance loop changes nothing it watches."""

ENVIRONMENTS = ("production", "staging")
SCHEDULE_ID = "nightly"
"""The id of the schedule every realm has (so one realm's names another's)."""
DEFINITIONS = ("send", "report")
NAMES = (
    "app",
    "billing",
    "billing ",
    "billing-2",
    "crm:eu",
    "a/b",
    "x*",
    "\u00fcn\u00ef",
    "u\u0308ni\u0308",
)
"""Application names: prefixes of each other, one with a trailing space, characters a glob
or a URI reads, and one name in two Unicode normalizations (NFC and NFD)."""
CONFUSABLE = (("billing", "billing "), ("\u00fcn\u00ef", "u\u0308ni\u0308"), ("app", "APP"))
"""Pairs of application names a careless comparison would take for one (both in one
tenant, half the time)."""
SECRET_VALUES = {
    "stripe": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2" * 9,
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x",
}
"""Material the README says is refused (tests/security/test_edge_answers.py's, in part)."""
REFUSAL_CODES = {
    401: {"WORKLOAD_UNAUTHORIZED"},
    403: {"WORKLOAD_UNAUTHORIZED", "WORKLOAD_APPROVER_NOT_PERMITTED"},
    404: {"WORKLOAD_NOT_FOUND"},
    422: {"WORKLOAD_INVALID", "WORKLOAD_SECRET_REJECTED"},
}


# ---------------------------------------------------------------------- the world


@dataclass
class Work:
    """A workload of the world, and what its worker holds of it."""

    workload_id: str
    state: str
    input_hash: str
    environment: str
    definition: str
    claim_id: str | None = None
    fencing_token: int | None = None


@dataclass
class Realm:
    """A tenant's application: its tokens and its work."""

    number: int
    tenant: str
    application: str
    admin_grant: Grant
    admin: dict[str, str]
    worker_subject: Subject
    worker: dict[str, str]
    requester: dict[str, str]
    work: list[Work] = field(default_factory=list)
    workflow_id: str = ""
    """The realm's workflow (one node, its input marked), which every attack names."""

    def owner(self, work: Work) -> Owner:
        return Owner(self.tenant, self.application, work.environment, work.definition)


@dataclass
class Soak:
    """One backend's run: the server, the ledger, the schema's operations, the store."""

    server: Server
    ledger: Ledger
    document: dict[str, Any]
    operations: list[Operation]
    store: WorkloadStore
    rng: random.Random = field(default_factory=random.Random)
    planted_real_key: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    refusals: Counter[str] = field(default_factory=Counter)
    """How the isolation attacks naming a victim's work were answered."""
    """Time spent in each phase, for the figures."""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - began

    # ---------------------------------------------------------------- tokens

    def grant(self, realm: Realm | None = None, **fields: Any) -> Grant:
        tenant = fields.pop("tenant", realm.tenant if realm else "t")
        application = fields.pop("application", realm.application if realm else "app")
        constraints = fields.pop("constraints", None)
        made = self.server.grant(application, tenant=tenant, **fields)
        if constraints is not None:
            made = msgspec.structs.replace(made, constraints=constraints)
        return made

    def headers(self, grant: Grant) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.ledger.token(self.server.keyring.sign(grant))}"}

    # ---------------------------------------------------------------- requests

    def send(
        self, method: str, url: str, headers: dict[str, str], body: Any = None, note: str = ""
    ) -> httpx.Response:
        return self.ledger.send(method, url, headers=headers, body=body, note=note)

    def operation(self, label: str) -> Operation:
        for operation in self.operations:
            if operation.label == label:
                return operation
        raise AssertionError(f"the OpenAPI document has no {label}")

    def call(
        self, operation: Operation, headers: dict[str, str], fill: dict[str, Any], note: str
    ) -> tuple[httpx.Response, str, Any]:
        url = operation.url(fill)
        body = body_of(operation, fill, self.document)
        if body is None and operation.body is not None and operation.body_required:
            body = {}
        return self.send(operation.method, url, headers, body, note), url, body

    def marker(self, realm: Realm, environment: str, definition: str) -> str:
        owner = Owner(realm.tenant, realm.application, environment, definition)
        return self.ledger.marker(owner, len(self.ledger.marker_owners) + 1, self.hex(10))

    def hex(self, digits: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(digits))

    # ---------------------------------------------------------------- the store

    def snapshot(self, realm: Realm) -> dict[str, Any]:
        """The realm's workloads as committed, and its schedules, read from the store
        directly."""
        found: dict[str, Any] = {
            w.workload_id: w.to_json() for w in self.store.list(realm.tenant, realm.application)
        }
        found["schedules"] = self.store.schedules.listed(realm.tenant, realm.application)
        return found

    def unchanged(self, realm: Realm, before: dict[str, Any], what: str) -> None:
        """The realm's work is as ``before``, and its administrator's token still works
        (nothing revoked it)."""
        after = self.snapshot(realm)
        if after.keys() != before.keys():
            self.ledger.changed.append(
                f"{what}: {realm.tenant}/{realm.application} gained or lost work"
            )
        for workload_id, document in before.items():
            if after.get(workload_id, document) != document:
                self.ledger.changed.append(f"{what}: {workload_id} of {realm.tenant} changed")
        served = self.send("GET", "/v1/workloads?limit=1", realm.admin, note=f"after {what}")
        if served.status_code != 200:
            self.ledger.changed.append(f"{what}: the realm's admin is now refused: {served.text}")


def tenant_names(rng: random.Random, round_number: int) -> list[str]:
    base = f"r{round_number}-{rng.randrange(16**6):06x}"
    names = [base, f"{base}-eu", f"{base}:x", f"{base}/x", base.upper(), f"{base} "]
    return [base, *rng.sample(names[1:], rng.randint(1, TENANTS - 1))]


def build_world(soak: Soak, round_number: int) -> list[Realm]:
    rng = soak.rng
    realms: list[Realm] = []
    shared = rng.choice(NAMES)  # the same application name in every tenant
    for tenant in tenant_names(rng, round_number):
        more = rng.choice(CONFUSABLE) if rng.random() < 0.5 else rng.sample(NAMES, 1)
        applications = {shared, *more}
        for application in sorted(applications):
            number = len(realms)
            worker = Subject.worker(rng.choice(["w1", "w2"]))  # the same names in every realm
            admin_grant = soak.grant(
                tenant=tenant, application=application, subject=Subject.service("admin")
            )
            realm = Realm(
                number=number,
                tenant=tenant,
                application=application,
                admin_grant=admin_grant,
                admin=soak.headers(admin_grant),
                worker_subject=worker,
                worker=soak.headers(
                    soak.grant(
                        tenant=tenant,
                        application=application,
                        subject=worker,
                        capabilities=["workload:claim", WORK_CAPABILITY],
                    )
                ),
                requester=soak.headers(
                    soak.grant(
                        tenant=tenant,
                        application=application,
                        subject=Subject.agent("requester"),
                        capabilities=[SUBMIT, READ],
                    )
                ),
            )
            populate(soak, realm)
            schedule(soak, realm)
            workflow(soak, realm)
            realms.append(realm)
    return realms


def schedule(soak: Soak, realm: Realm) -> None:
    """A schedule of the realm's, :data:`SCHEDULE_ID` in every realm, its template marked;
    it occurs on 29 February only, so it admits nothing during a run.
    """
    environment, definition = soak.rng.choice(ENVIRONMENTS), soak.rng.choice(DEFINITIONS)
    marker = soak.marker(realm, environment, definition)
    body = {
        "schedule_id": SCHEDULE_ID,
        "cron": "0 0 29 2 *",
        "template": {
            "definition_id": definition,
            "environment": environment,
            "input": {"marker": marker},
        },
    }
    answer = soak.send("POST", "/v1/schedules", realm.admin, body, "populate")
    assert answer.status_code == 201, answer.text


def workflow(soak: Soak, realm: Realm) -> None:
    """A workflow of the realm's requester, its one node's input marked (reading it
    elsewhere would show); its id is what every attack's ``workflow_id`` names."""
    environment, definition = soak.rng.choice(ENVIRONMENTS), soak.rng.choice(DEFINITIONS)
    marker = soak.marker(realm, environment, definition)
    submission = {"definition_id": definition, "environment": environment,
                  "input": {"marker": marker}}  # fmt: skip
    body = {"key": "nightly", "nodes": [{"name": "only", "submission": submission}]}
    answer = soak.send("POST", "/v1/workflows", realm.requester, body, "populate")
    assert answer.status_code == 201, answer.text
    realm.workflow_id = answer.json()["workflow_id"]


def submit(soak: Soak, realm: Realm, state: str, headers: dict[str, str], **body: Any) -> Work:
    environment = body.pop("environment", soak.rng.choice(ENVIRONMENTS))
    definition = body.pop("definition_id", soak.rng.choice(DEFINITIONS))
    marker = soak.marker(realm, environment, definition)
    body.setdefault("input", {"marker": marker, "n": soak.rng.randint(0, 9)})
    request = submission(
        f"{state}-{marker}", environment=environment, definition_id=definition, **body
    )
    answer = soak.send("POST", "/v1/workloads", headers, request, "populate")
    assert answer.status_code == 201, answer.text
    admitted = answer.json()
    work = Work(
        admitted["workload_id"], admitted["state"], admitted["input_hash"], environment, definition
    )
    soak.ledger.owners[work.workload_id] = realm.owner(work)
    realm.work.append(work)
    return work


def act(
    soak: Soak, realm: Realm, work: Work, action: str, body: dict[str, Any], status: int
) -> Any:
    headers = realm.admin if action == "cancel" else realm.worker
    if work.claim_id is not None and action != "cancel":
        body = {"claim_id": work.claim_id, "fencing_token": work.fencing_token, **body}
    answer = soak.send(
        "POST", f"/v1/workloads/{work.workload_id}/{action}", headers, body, "populate"
    )
    assert answer.status_code == status, (action, answer.text)
    return answer.json() if answer.content else None


def populate(soak: Soak, realm: Realm) -> None:
    """Work in every state reachable at once, each with a marker in what it shows."""
    submit(soak, realm, "READY", realm.requester)
    for state in ("CLAIMED", "RUNNING", "CANCELLATION_REQUESTED", "SUCCEEDED", "DEAD_LETTER"):
        work = submit(soak, realm, state, realm.requester, retry_policy={"max_attempts": 1})
        claimed = act(soak, realm, work, "claim", {"lease_ms": LEASE_MS}, 200)
        work.claim_id, work.fencing_token = claimed["claim_id"], claimed["fencing_token"]
        work.state = "CLAIMED"
        if state == "CLAIMED":
            continue
        act(soak, realm, work, "start", {}, 204)
        marker = soak.marker(realm, work.environment, work.definition)
        act(soak, realm, work, "checkpoint", {"state": {"marker": marker}}, 200)
        work.state = "RUNNING"
        if state == "CANCELLATION_REQUESTED":
            act(soak, realm, work, "cancel", {}, 200)
        elif state == "SUCCEEDED":
            output = {"marker": soak.marker(realm, work.environment, work.definition)}
            act(
                soak, realm, work, "complete", {"result_id": f"res-{marker}", "output": output}, 200
            )
        elif state == "DEAD_LETTER":
            act(soak, realm, work, "fail", {"kind": "permanent", "error": f"e-{marker}"}, 200)
        work.state = state
    policy = {"approver_kinds": ["human"]}
    submit(soak, realm, "AWAITING_APPROVAL", realm.requester, approval=policy)


# ---------------------------------------------------------------------- fills


def fill_for(soak: Soak, realm: Realm, work: Work, *, owner: Realm | None = None) -> dict[str, Any]:
    """What every request of an attack on ``work`` is filled with: its real ids and fence,
    and, for what the attacker writes, markers of the attacker's own (``owner``: whose
    markers they are; ``None``: none, plain values)."""
    rng = soak.rng
    mark = (
        soak.marker(owner, work.environment, work.definition)
        if owner is not None
        else f"plain-{soak.hex(8)}"
    )
    fill: dict[str, Any] = {
        "workload_id": work.workload_id,
        "grant_id": realm.admin_grant.id,
        "schedule_id": SCHEDULE_ID,  # every realm has one of this id: the victim's is named
        "workflow_id": realm.workflow_id,
        "claim_id": work.claim_id or f"claim_{soak.hex(20)}",
        "fencing_token": work.fencing_token if work.fencing_token is not None else 1,
        "input_hash": work.input_hash,
        "result_id": f"res-{soak.hex(8)}",
        "output": {"probe": mark},
        "state": {"probe": mark},
        "input": {"probe": mark},
        "kind": "permanent",
        "error": "probe failure",
        "outcome": rng.choice(["approved", "rejected"]),
        "reason": "probe reason",
        "lease_ms": LEASE_MS,
        "extend_ms": LEASE_MS,
        "wait_ms": 0,
        "limit": 2,
        "name": f"probe-{soak.hex(6)}",  # a rate limit's
        "starts": 2,
        "period_s": 60,
        "aging_s": 60,
        "start": rng.random() < 0.5,
        "capability_snapshot": [WORK_CAPABILITY],
        "environment": work.environment,
        "definition_id": work.definition,
        "definition_revision": "r1",
        "trigger": "manual",
        "idempotency_key": f"probe-{soak.hex(12)}",
        # A page's cursor forged to start just before the victim's work, and its revision.
        "cursor": base64.urlsafe_b64encode(json.dumps([9, 0, work.workload_id]).encode())
        .decode()
        .rstrip("="),
        "after": 0,
    }
    if rng.random() < 0.5:
        fill["dependencies"] = [{"workload_id": work.workload_id}]
    submission_body = soak.operation("POST /v1/workloads").body
    assert submission_body is not None
    fill[OBJECT] = body_of(soak.operation("POST /v1/workloads"), fill, soak.document)
    # A workflow of one node, the submission above ("after" is also the audit's cursor).
    fill["nodes"] = [{"name": "probe", "after": [], "submission": fill[OBJECT]}]
    fill["key"] = f"probe-{soak.hex(12)}"
    return fill


def swapped(fill: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``fill`` with every occurrence of the id ``old`` replaced by ``new``."""
    replaced: dict[str, Any] = json.loads(json.dumps(fill).replace(old, new))
    return replaced


def error_code(answer: httpx.Response | dict[str, Any]) -> str | None:
    try:
        body = answer.json() if isinstance(answer, httpx.Response) else answer
        code: str = body["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code


def answer_codes(answer: httpx.Response) -> str:
    """The code of a refusal, or the codes of a batch's items (for the figures)."""
    code = error_code(answer)
    if code is not None:
        return code
    try:
        items = answer.json()["items"]
        return "items: " + ",".join(sorted({str(error_code(item)) for item in items}))
    except (ValueError, KeyError, TypeError):
        return "?"


def refusal(answer: httpx.Response, statuses: set[int]) -> bool:
    """Whether ``answer`` refuses, with one of ``statuses`` and its code: as a whole, or
    as a batch every item of which is so refused."""
    if answer.status_code in statuses:
        return error_code(answer) in REFUSAL_CODES.get(answer.status_code, set())
    if answer.status_code != 200:
        return False
    items = answer.json().get("items") if isinstance(answer.json(), dict) else None
    if not isinstance(items, list) or not items:
        return False
    return all(
        isinstance(item, dict)
        and item.get("status") in statuses
        and error_code(item) in REFUSAL_CODES.get(item["status"], set())
        for item in items
    )


# ---------------------------------------------------------------------- isolation


def outsiders(soak: Soak, victim: Realm, realms: list[Realm]) -> Iterator[tuple[str, Grant]]:
    """Tokens that may not see ``victim``'s work, round-robin over the kinds of outsider,
    each with random capabilities, resources and subject."""
    rng = soak.rng
    others = [r for r in realms if (r.tenant, r.application) != (victim.tenant, victim.application)]
    other_tenants = [r for r in others if r.tenant != victim.tenant]
    same_tenant = [r for r in others if r.tenant == victim.tenant]
    kinds = ["same-name-other-tenant", "other-tenant", "other-application", "constrained"]
    while True:
        for kind in kinds:
            if kind == "same-name-other-tenant":
                tenant = rng.choice([r.tenant for r in other_tenants] or [victim.tenant + "-x"])
                where = (tenant, victim.application)
            elif kind == "other-tenant" and other_tenants:
                chosen = rng.choice(other_tenants)
                where = (chosen.tenant, chosen.application)
            elif kind == "other-application":
                chosen_app = rng.choice(
                    [r.application for r in same_tenant] or [victim.application + "-other"]
                )
                where = (victim.tenant, chosen_app)
            else:
                kind = "constrained"
                where = (victim.tenant, victim.application)
            tenant, application = where
            resources = rng.choice(
                [
                    [f"flow://{application}/workloads/*"],
                    ["flow://*"],
                    ["flow://*/workloads/*"],
                    [f"flow://{victim.application}/workloads/*"],
                    [
                        f"flow://{victim.application}/workloads/{rng.choice(victim.work).workload_id}"
                    ],
                ]
            )
            capabilities = [c for c in sorted(ALL_CAPABILITIES) if rng.random() < 0.8]
            constraints = None
            if kind == "constrained":
                constraints = rng.choice(
                    [
                        GrantConstraints(environments=["elsewhere"]),
                        GrantConstraints(definitions=["elsewhere"]),
                    ]
                )
            subject = rng.choice(
                [victim.worker_subject, Subject.human("ops"), Subject.service("admin"),
                 Subject.agent("requester")]
            )  # fmt: skip
            yield (
                kind,
                soak.grant(
                    tenant=tenant,
                    application=application,
                    subject=subject,
                    capabilities=[*capabilities, WORK_CAPABILITY],
                    resources=resources,
                    constraints=constraints,
                ),
            )


def attack_isolation(soak: Soak, victim: Realm, realms: list[Realm]) -> None:
    rng = soak.rng
    before = soak.snapshot(victim)
    tokens = outsiders(soak, victim, realms)
    for operation in soak.operations:
        for _ in range(OUTSIDERS_PER_OPERATION if operation.authenticated else 1):
            kind, grant = next(tokens)
            headers = soak.headers(grant)
            work = rng.choice(victim.work)
            attacker = next(
                (
                    r
                    for r in realms
                    if (r.tenant, r.application) == (grant.tenant_id, grant.application_id)
                ),
                None,
            )
            fill = fill_for(soak, victim, work, owner=attacker)
            note = f"isolation {kind} on {work.state}"
            answer, url, body = soak.call(operation, headers, fill, note)
            if not operation.authenticated:
                soak.ledger.check(
                    answer.status_code == 200, f"{operation.label}: {answer.status_code}"
                )
                continue
            if work.workload_id not in url + json.dumps(body):
                continue  # it names nothing of the victim's: the ledger judged what it showed
            missing = f"workload_{soak.hex(24)}"
            if any(work.workload_id in scope.uri for scope in grant.resources):
                # The outsider's grant names this id: its twin names the missing one.
                resources = tuple(
                    msgspec.structs.replace(scope, uri=scope.uri.replace(work.workload_id, missing))
                    for scope in grant.resources
                )
                headers = soak.headers(msgspec.structs.replace(grant, resources=resources))
            twin, _, _ = soak.call(
                operation,
                headers,
                swapped(fill, work.workload_id, missing),
                note + " (missing twin)",
            )
            same = answer.status_code == twin.status_code and answer.text.replace(
                work.workload_id, "<ID>"
            ) == twin.text.replace(missing, "<ID>")
            soak.refusals[f"{answer.status_code} {answer_codes(answer)}"] += 1
            soak.ledger.expect(
                refusal(answer, {403, 404, 422}) and same,
                f"{operation.label} [{note}]: {answer.status_code} {answer.text[:300]}"
                f" / for missing work: {twin.status_code} {twin.text[:200]}",
            )
    soak.unchanged(victim, before, "isolation attack")
    # Nothing of the victim's was revoked or hidden from it.
    mine = soak.send("GET", "/v1/workloads?limit=500", victim.admin, note="victim still served")
    listed = (
        {w["workload_id"] for w in mine.json().get("items", [])}
        if mine.status_code == 200
        else set()
    )
    soak.ledger.check(
        mine.status_code == 200 and listed >= {w.workload_id for w in victim.work},
        f"the victim's own admin token after the attack: {mine.status_code} {mine.text[:200]}",
    )


# ---------------------------------------------------------------------- credentials


def attack_credentials(
    soak: Soak, realm: Realm, assigned: list[tuple[Operation, BadToken]]
) -> None:
    before = soak.snapshot(realm)
    for operation, bad in assigned:
        soak.ledger.token((bad.authorization or "").removeprefix("Bearer "))
        work = soak.rng.choice(realm.work)
        answer, _, _ = soak.call(
            operation, bad.headers(), fill_for(soak, realm, work), f"bad token {bad.kind}"
        )
        if not operation.authenticated:
            soak.ledger.check(answer.status_code == 200, f"{operation.label}: {answer.status_code}")
            continue
        challenged = bad.status != UNDECODABLE or answer.headers.get("www-authenticate") == "Bearer"
        soak.ledger.expect(
            answer.status_code == bad.status
            and error_code(answer) == "WORKLOAD_UNAUTHORIZED"
            and challenged,
            f"{operation.label} with a token {bad.kind}: {answer.status_code} {answer.text[:200]}"
            f" (the README says {bad.status})",
        )
    soak.unchanged(realm, before, "bad tokens")


def attack_revoked(soak: Soak, realm: Realm) -> None:
    before = soak.snapshot(realm)
    doomed = msgspec.structs.replace(
        soak.grant(realm, subject=Subject.service("doomed")),
        id=soak.ledger.grant_id(realm.tenant, realm.application, soak.hex(10)),
    )
    headers = soak.headers(doomed)
    first = soak.send("GET", "/v1/workloads", headers, note="before revocation (cached)")
    assert first.status_code == 200, first.text
    # Its id is made by the ledger (to spot a leak), not minted by feltdb: revoked by force.
    path, force = f"/v1/grants/{doomed.id}/revoke", {"force": True}
    revoked = soak.send("POST", path, realm.admin, body=force, note="revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True, revoked.text
    for operation in soak.operations:
        if not operation.authenticated:
            continue
        work = soak.rng.choice(realm.work)
        answer, _, _ = soak.call(operation, headers, fill_for(soak, realm, work), "revoked token")
        soak.ledger.expect(
            answer.status_code == 403
            and error_code(answer) == "WORKLOAD_UNAUTHORIZED"
            and "revoked" in answer.json()["error"]["message"],
            f"{operation.label} with a revoked token: {answer.status_code} {answer.text[:200]}",
        )
    soak.unchanged(realm, before, "revoked token")


def attack_expiry_after_cache(soak: Soak, realm: Realm) -> None:
    """A token the server verified (and remembers) is refused once it expires."""
    for _ in range(3):  # a machine too busy to answer within the token's life tries again
        time.sleep(1.02 - time.time() % 1)  # just after a second begins
        now = int(time.time())
        short = soak.grant(realm, subject=Subject.service("brief"), issued_at=now - 5, lifetime=7)
        headers = soak.headers(short)
        first = soak.send("GET", "/v1/workloads", headers, note="before expiry (cached)")
        if first.status_code == 200 or time.time() < short.expires_at:
            break
    assert first.status_code == 200, first.text
    time.sleep(max(0.0, short.expires_at - time.time()) + 0.02)
    for operation in soak.operations:
        if not operation.authenticated:
            continue
        work = soak.rng.choice(realm.work)
        answer, _, _ = soak.call(
            operation, headers, fill_for(soak, realm, work), "expired after cache"
        )
        soak.ledger.expect(
            answer.status_code == 403 and error_code(answer) == "WORKLOAD_UNAUTHORIZED",
            f"{operation.label} with a token expired since it was verified:"
            f" {answer.status_code} {answer.text[:200]}",
        )


def attack_wrong_scope(soak: Soak, realm: Realm, offset: int) -> None:
    """Valid tokens of the realm's own application that cover nothing of it."""
    before = soak.snapshot(realm)
    everything = f"flow://{realm.application}/workloads/*"
    variants = [
        ("no capabilities", soak.grant(realm, capabilities=[])),
        (
            "another application's resources",
            soak.grant(realm, resources=[f"flow://{realm.application}-other/workloads/*"]),
        ),
        *(
            (
                f"a {kind.value} scope",
                msgspec.structs.replace(
                    soak.grant(realm), resources=[ResourceScope(kind=kind, uri=everything)]
                ),
            )
            for kind in (
                ResourceScopeKind.SECRET,
                ResourceScopeKind.CONNECTION,
                ResourceScopeKind.AUDIT,
            )
        ),
    ]
    headers = [(name, soak.headers(grant)) for name, grant in variants]
    for index, operation in enumerate(soak.operations):
        if not operation.authenticated:
            continue
        name, token = headers[(index + offset) % len(headers)]
        work = soak.rng.choice(realm.work)
        answer, _, _ = soak.call(
            operation, token, fill_for(soak, realm, work), f"wrong scope: {name}"
        )
        soak.ledger.expect(
            refusal(answer, {403}),
            f"{operation.label} with {name}: {answer.status_code} {answer.text[:200]}",
        )
    soak.unchanged(realm, before, "wrong scope")


# ---------------------------------------------------------------------- approval

APPROVER_POOL = (Subject.human("ada"), Subject.human("bob"), Subject.service("ops-bot"))
DECIDER_POOL = (
    *APPROVER_POOL,
    Subject.human("eve"),
    Subject.service("other-bot"),
    Subject.agent("ada"),
    Subject.worker("ada"),
    Subject.workload("workload_ada"),
    Subject.connection("crm"),
    Subject.agent("requester"),
)


def permitted(policy: dict[str, Any], requester: Subject, decider: Subject) -> bool:
    """The README's rule: a permitted kind, listed if approvers are listed, never the
    requester."""
    listed = {(a["kind"], a["id"]) for a in policy.get("approvers", [])}
    return (
        decider.kind.value in policy["approver_kinds"]
        and (not listed or (decider.kind.value, decider.id) in listed)
        and decider != requester
    )


def attack_approvals(soak: Soak, realm: Realm) -> int:
    """Random deciders on random policies; answers the forbidden decisions refused."""
    rng = soak.rng
    refused = 0
    for _ in range(2):
        kinds = rng.choice([["human"], ["service"], ["human", "service"]])
        allowed = [s for s in APPROVER_POOL if s.kind.value in kinds]
        approvers = rng.sample(allowed, rng.randint(0, len(allowed)))
        policy: dict[str, Any] = {"approver_kinds": kinds}
        if approvers:
            policy["approvers"] = [s.to_json() for s in approvers]
        requester = rng.choice(
            [Subject.agent("requester"), Subject.human("ada"), Subject.service("ops-bot")]
        )
        asking = soak.headers(soak.grant(realm, subject=requester, capabilities=[SUBMIT, READ]))
        work = submit(soak, realm, "GATED", asking, approval=policy)
        decided: tuple[str, Subject, str] | None = None
        for attempt in range(6):
            decider = rng.choice(DECIDER_POOL)
            may_approve = rng.random() < 0.85
            covering = rng.random() < 0.85
            grant = soak.grant(
                realm,
                subject=decider,
                capabilities=[READ, *([APPROVE] if may_approve else [])],
                resources=None
                if covering
                else [f"flow://{realm.application}/workloads/workload_0"],
            )
            outcome = rng.choice(["approved", "rejected"])
            answer = soak.send(
                "POST",
                f"/v1/workloads/{work.workload_id}/decision",
                soak.headers(grant),
                {"outcome": outcome, "reason": f"attempt {attempt}", "input_hash": work.input_hash},
                f"decide as {decider}",
            )
            what = f"{decider} deciding {outcome} under {policy} of {requester}"
            if not (may_approve and covering):
                refused += soak.ledger.expect(
                    answer.status_code == 403 and error_code(answer) == "WORKLOAD_UNAUTHORIZED",
                    f"{what} without approve on it: {answer.status_code} {answer.text[:200]}",
                )
            elif not permitted(policy, requester, decider):
                refused += soak.ledger.expect(
                    answer.status_code == 403
                    and error_code(answer) == "WORKLOAD_APPROVER_NOT_PERMITTED",
                    f"{what}: {answer.status_code} {answer.text[:200]}",
                )
            elif decided is None:
                if answer.status_code != 200:
                    soak.ledger.unexpected.append(f"{what} (permitted): {answer.text[:200]}")
                else:
                    decided = (outcome, decider, grant.id)
            elif outcome == decided[0]:
                if answer.status_code != 200 or answer.json()["replayed"] is not True:
                    soak.ledger.unexpected.append(f"{what} (a replay): {answer.text[:200]}")
            elif answer.status_code != 409 or error_code(answer) != "WORKLOAD_APPROVAL_DECIDED":
                soak.ledger.unexpected.append(f"{what} (decided already): {answer.text[:200]}")
        stored = soak.store.get(work.workload_id)
        decision = stored.approval.decision if stored.approval is not None else None
        if decided is None:
            if decision is not None or stored.state.value != "AWAITING_APPROVAL":
                soak.ledger.changed.append(
                    f"{work.workload_id} decided by a forbidden subject: {decision}"
                )
        elif (
            decision is None
            or (decision.outcome.value, decision.decided_by, decision.grant_id) != decided
        ):
            soak.ledger.changed.append(f"{work.workload_id}: stored {decision}, decided {decided}")
        work.state = stored.state.value
    return refused


# ---------------------------------------------------------------------- secret material


def key_material(server: Server) -> list[str]:
    """The server's signing keys in every encoding an answer or a log could show."""
    keys = json.loads(server.keyring.to_json())["keys"]
    found = []
    for encoded in keys.values():
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        found += [encoded, raw.hex(), base64.b64encode(raw).decode()]
    return found


def plant_secrets(soak: Soak, realm: Realm) -> None:
    """Secret material in every place a request can put text or a document."""
    rng = soak.rng
    running = next(w for w in realm.work if w.state == "RUNNING")
    owner = realm.owner(running)
    worker_token = realm.worker["Authorization"].removeprefix("Bearer ")
    refused = {
        "the admin's token": realm.admin["Authorization"].removeprefix("Bearer "),
        "the worker's token": worker_token,
        "a bearer credential": realm.worker["Authorization"],
        **SECRET_VALUES,
    }
    soak.ledger.never(*refused.values())
    dead = next(w for w in realm.work if w.state == "DEAD_LETTER")
    gated = next(w for w in realm.work if w.state == "AWAITING_APPROVAL")
    before = soak.snapshot(realm)
    for name, secret in refused.items():
        short = secret if len(secret) <= 256 else None
        places: list[tuple[str, Work, dict[str, str], dict[str, Any]]] = [
            ("POST /v1/workloads", running, realm.requester, {"input": {"note": secret}}),
            ("POST /v1/batches/workloads", running, realm.requester, {"input": {"note": secret}}),
            (
                "POST /v1/workloads/{workload_id}/checkpoint",
                running,
                realm.worker,
                {"state": {"note": secret}},
            ),
            (
                "POST /v1/workloads/{workload_id}/complete",
                running,
                realm.worker,
                {"output": {"note": secret}},
            ),
            ("POST /v1/batches/completions", running, realm.worker, {"output": [secret]}),
            (
                "POST /v1/workloads/{workload_id}/fail",
                running,
                realm.worker,
                {"error": f"auth failed: {secret}"},
            ),
            (
                "POST /v1/workloads/{workload_id}/decision",
                gated,
                realm.admin,
                {"outcome": "rejected", "reason": secret},
            ),
            ("POST /v1/workloads/{workload_id}/retry", dead, realm.admin, {"reason": secret}),
        ]
        if short is not None:
            places += [
                ("POST /v1/workloads", running, realm.requester, {"idempotency_key": short}),
                ("POST /v1/workloads", running, realm.requester, {"session_id": short}),
                (
                    "POST /v1/workloads/{workload_id}/complete",
                    running,
                    realm.worker,
                    {"result_id": short},
                ),
                ("POST /v1/workloads/{workload_id}/fail", running, realm.worker, {"kind": short}),
            ]
        for label, work, headers, override in rng.sample(places, len(places)):
            fill = {**fill_for(soak, realm, work), **override}
            fill[OBJECT] = body_of(soak.operation("POST /v1/workloads"), fill, soak.document)
            answer, _, _ = soak.call(soak.operation(label), headers, fill, f"secret {name}")
            soak.ledger.expect(
                refusal(answer, {422}),
                f"{label} with {name} in {sorted(override)}:"
                f" {answer.status_code} {answer.text[:200]}",
            )
    for key in ("client_secret", "apiKey", "db_password", "Authorization"):
        answer = soak.send(
            "POST", "/v1/workloads", realm.requester,
            submission(f"named-{soak.hex(8)}", input={"ok": 1, key: f"v-{soak.hex(8)}"}),
            f"secret-named key {key}",
        )  # fmt: skip
        soak.ledger.expect(
            answer.status_code == 422 and error_code(answer) == "WORKLOAD_SECRET_REJECTED",
            f"an input key {key!r}: {answer.status_code} {answer.text[:200]}",
        )
    soak.unchanged(realm, before, "refused secret material")
    # What no rule can tell from data may be admitted, and then shows only where it was put:
    # the server's own signing key once (in the first realm planted), a key of the same
    # shape in every other (one value in two realms could not tell whose a copy is).
    keyring = soak.server.keyring if not soak.planted_real_key else Keyring.generate()
    soak.planted_real_key = True
    encoded = json.loads(keyring.to_json())["keys"][keyring.active]
    raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    for secret in (encoded, raw.hex(), keyring.to_json()):
        soak.ledger.admit_secret(secret, owner)
        planted = soak.send(
            "POST", "/v1/workloads", realm.requester,
            submission(f"keyed-{soak.hex(8)}", input={"note": secret},
                       environment=running.environment, definition_id=running.definition),
            "signing key in an input",
        )  # fmt: skip
        if planted.status_code == 201:
            soak.ledger.owners[planted.json()["workload_id"]] = owner
            soak.send(
                "GET",
                f"/v1/workloads/{planted.json()['workload_id']}",
                realm.admin,
                note="read back",
            )
        fence = {"claim_id": running.claim_id, "fencing_token": running.fencing_token}
        soak.send(
            "POST", f"/v1/workloads/{running.workload_id}/checkpoint", realm.worker,
            {**fence, "state": {"note": secret}}, "signing key in a checkpoint",
        )  # fmt: skip
    soak.send("GET", f"/v1/workloads/{running.workload_id}", realm.admin, note="read back")


# ---------------------------------------------------------------------- the test


def assign_bad_tokens(
    soak: Soak, realms: list[Realm], now: int, round_number: int
) -> dict[int, list[tuple[Operation, BadToken]]]:
    """The (operation, bad token) pairs of this round, spread over the realms: every pair
    in the soak, and in the bounded run one in :data:`BAD_TOKEN_SHARE` (every operation
    still meets every kind of failure: undecodable, forged, expired, tampered)."""
    assigned: dict[int, list[tuple[Operation, BadToken]]] = {r.number: [] for r in realms}
    made = {r.number: bad_tokens(soak.server.keyring, r.admin_grant, now, soak.rng) for r in realms}
    for o, operation in enumerate(soak.operations):
        for b in range(len(made[realms[0].number])):
            if (o + b + round_number) % BAD_TOKEN_SHARE:
                continue
            realm = realms[(o + b + round_number) % len(realms)]
            assigned[realm.number].append((operation, made[realm.number][b]))
    return assigned


def run_round(soak: Soak, round_number: int) -> int:
    with soak.phase("world"):
        realms = build_world(soak, round_number)
    with soak.phase("secrets"):
        for realm in soak.rng.sample(realms, min(2, len(realms))):
            plant_secrets(soak, realm)
    with soak.phase("credentials"):  # first: each realm's revocations exist to be hidden
        for realm in realms:
            attack_revoked(soak, realm)
    with soak.phase("isolation"):
        for victim in realms:
            attack_isolation(soak, victim, realms)
    assigned = assign_bad_tokens(soak, realms, int(time.time()), round_number)
    for realm in realms:
        with soak.phase("credentials"):
            attack_credentials(soak, realm, assigned[realm.number])
        with soak.phase("wrong scope"):
            attack_wrong_scope(soak, realm, round_number + realm.number)
    if round_number == 0:
        with soak.phase("expiry"):
            attack_expiry_after_cache(soak, realms[0])
    with soak.phase("approvals"):
        return sum(attack_approvals(soak, realm) for realm in realms)


def test_no_token_reads_another_tenants_work_forges_or_leaks(
    server: Server, http: httpx.Client, backend: str
) -> None:
    print(f"security soak: seed {SEED} (FELTDB_SECURITY_SEED={SEED} replays it), {ROUNDS} rounds")
    document = http.get("/openapi.json").json()
    found = operations(document)
    assert len(found) >= 20, [o.label for o in found]
    ledger = Ledger(http)
    ledger.never(*key_material(server), server.keyring.to_json())
    started = time.monotonic()
    forbidden_decisions = 0
    with WorkloadStore.open(server.target) as store:
        soak = Soak(server, ledger, document, found, store)
        for round_number in range(ROUNDS):
            soak.rng = random.Random(f"{SEED}:{round_number}")
            forbidden_decisions += run_round(soak, round_number)
            soak.send("GET", "/metrics", {}, note="metrics, no token")
            logged = ledger.scan_log(server.log, f"round {round_number}")
            assert logged > 0, f"the server logged no request in round {round_number}"
    figures = ledger.figures()
    record(
        "security",
        "isolation-and-credentials",
        backend,
        seed=SEED,
        rounds=ROUNDS,
        operations=len(found),
        forbidden_decisions_refused=forbidden_decisions,
        isolation_answers=dict(soak.refusals),
        seconds=round(time.monotonic() - started, 1),
        command="make soak",
        **figures,
    )
    print(
        f"security soak ({backend}): {figures}, {forbidden_decisions} forbidden decisions"
        f" refused; isolation answers {dict(soak.refusals)};"
        f" seconds by phase: { {k: round(v, 1) for k, v in soak.seconds.items()} }"
    )
    problems = ledger.problems()
    assert not problems, f"seed {SEED}: {len(problems)} problems:\n" + "\n".join(problems[:40])
    assert figures["refused_as_expected"] > 0 and forbidden_decisions > 0


def test_the_ledger_sees_each_kind_of_leak() -> None:
    """The soak's judge is not vacuous: each kind of leak it looks for, planted in a made-up
    answer, is found, and what a caller may see is not taken for one."""
    ledger = Ledger(httpx.Client())
    mine = Owner("t", "app", "production", "send")
    theirs = Owner("t2", "app", "production", "send")
    ledger.marker_owners.update({1: mine, 2: theirs})
    ledger.owners["workload_" + "b" * 24] = theirs
    ledger.never("sk_live_4eC39HqLyjWDarjtT1zdp7dc")
    ledger.admit_secret("key-material-0123456789", mine)
    grant = application_grant(Subject.human("h"), "t", "app", [READ], issued_at=0, expires_at=9)
    token = Keyring.generate().sign(grant)
    caller = {"Authorization": f"Bearer {token}"}

    def scan(status: int, body: Any) -> None:
        ledger.scan(httpx.Response(status, json=body), view_of(caller), "/v1/x", "made-up")

    scan(200, {"input": {"m": "mk1z0123456789", "k": "key-material-0123456789"}})
    scan(
        200, {"tenant_id": "t", "application_id": "app", "state": {"k": "key-material-0123456789"}}
    )
    assert ledger.problems() == []
    scan(200, {"note": f"Bearer {token}"})
    scan(422, {"error": {"message": "refused: sk_live_4eC39HqLyjWDarjtT1zdp7dc"}})
    scan(200, {"message": "key-material-0123456789"})
    scan(403, {"input": {"m": "mk1z0123456789"}})
    assert len(ledger.leaks) == 3, ledger.leaks
    scan(200, {"input": {"m": "mk2z0123456789"}})
    scan(200, {"items": [{"workload_id": "workload_" + "b" * 24}]})
    scan(200, {"tenant_id": "t2", "application_id": "app"})
    assert len(ledger.cross_tenant_reads) == 4, ledger.cross_tenant_reads
