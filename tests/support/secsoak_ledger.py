"""The security soak's ledger: every request it sends goes through :class:`Ledger`, which
counts it and reads its answer for material the caller must never see.

Every answer (status, headers and body, refusals included) is scanned for:

- **credentials**: anything shaped like a feltdb token (:data:`TOKEN`: the API returns
  none), the signature of every token the soak minted, the server's signing key in each
  encoding, and every secret value the server had to refuse (:meth:`Ledger.never`). None
  may appear in any answer (body or headers), nor in the server's log;
- **another scope's work**: the markers the soak puts in each scope's inputs, checkpoint
  states and outputs, and the ids of each scope's workloads. A *scope* is a tenant's
  application narrowed to an environment and a definition, as a grant's constraints narrow
  it; a marker or an id of work the caller's grant does not admit may appear only as an echo
  of the request (an id it sent, or a marker it sent), and an answer ``401`` or ``403``
  (a token not accepted for the request) may show no one's. The same holds of the ids of
  grants the soak revokes (:meth:`Ledger.grant_id`), by tenant and application;
- **tenant fields**: every object of a successful answer that names a tenant and an
  application (``tenant_id``/``application_id``, the audit's ``tenant``/``application``)
  must name the caller's;
- **secrets admitted on purpose** (material no rule can tell from data, such as a signing
  key's bytes placed in an input): they may appear only to a caller admitting their
  owner's scope, only in a successful answer, and only inside an ``input``, ``output`` or
  checkpoint ``state`` document (:data:`DOCUMENT_FIELDS`), never in a refusal or a log.

What is NOT judged here: whether a status is the right one (the soak's phases decide
that), and what the headers show of another scope (only bodies are read for markers, ids
and tenant fields; headers only for credentials).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from feltdb.auth.tokens import decode_token

MARKER = re.compile(r"mk(\d+)z[0-9a-f]{10}")
"""A marker: ``mk<owner number>z<10 hex digits>``; the number finds its owner."""
GRANT_ID = re.compile(r"gr(\d+)z[0-9a-f]{10}")
"""A grant id the soak marked: ``gr<number>z<10 hex digits>``; the number finds its
tenant's application (a revocation list is one application's)."""
WORKLOAD_ID = re.compile(r"workload_[0-9a-f]{24}")
HEX64 = re.compile(r"[0-9a-f]{64}")
TOKEN = re.compile(r"fgt[0-9]+\.[A-Za-z0-9_-]{16,}")
"""Anything shaped like a feltdb token: the API returns none, so none may appear."""
ACCESS_LINE = re.compile(r"(?m)(?:GET|POST) /v1/\S* \d{3} ")
"""A line of the server's access log."""
DOCUMENT_FIELDS = frozenset({"input", "input_preview", "output", "state"})
"""A path through one of these names is inside a document the API returns as given."""


@dataclass(frozen=True)
class Owner:
    """Whose work something is: a tenant's application, environment and definition."""

    tenant: str
    application: str
    environment: str
    definition: str


@dataclass(frozen=True)
class View:
    """What a caller's grant admits (its tenant's application, within its constraints)."""

    tenant: str
    application: str
    environments: frozenset[str]
    definitions: frozenset[str]

    def admits(self, owner: Owner) -> bool:
        return (
            owner.tenant == self.tenant
            and owner.application == self.application
            and (not self.environments or owner.environment in self.environments)
            and (not self.definitions or owner.definition in self.definitions)
        )


def _grant_id_of(headers: Mapping[str, str]) -> str:
    try:
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        return decode_token(token).grant.id
    except Exception:
        return ""


def view_of(headers: Mapping[str, str]) -> View | None:
    """The view of the grant a request's token claims (``None``: no decodable token)."""
    authorization = headers.get("Authorization", "")
    if not authorization.startswith("Bearer "):
        return None
    try:
        grant = decode_token(authorization.removeprefix("Bearer ")).grant
    except Exception:
        return None
    return View(
        grant.tenant_id,
        grant.application_id,
        frozenset(grant.constraints.environments),
        frozenset(grant.constraints.definitions),
    )


@dataclass
class Ledger:
    """Sends the soak's requests, counts them, and keeps what their answers revealed."""

    http: httpx.Client
    requests: int = 0
    refused_as_expected: int = 0
    leaks: list[str] = field(default_factory=list)
    cross_tenant_reads: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    owners: dict[str, Owner] = field(default_factory=dict)
    """Workload id → owner, of every workload the soak admitted."""
    marker_owners: dict[int, Owner] = field(default_factory=dict)
    grant_owners: dict[int, tuple[str, str]] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    """Strings no answer and no log line may hold."""
    admitted_secrets: dict[str, tuple[str, Owner]] = field(default_factory=dict)
    """Secret values the soak placed in documents on purpose (each form of the text an
    answer may hold → the value, and whose it is)."""
    signatures: set[str] = field(default_factory=set)
    log_offset: int = 0

    # ------------------------------------------------------------------ registering

    def never(self, *values: str) -> None:
        """No answer and no log line may ever hold any of ``values`` (as given, or escaped
        as a JSON string holds it)."""
        for value in values:
            if len(value) >= 8 and value not in self.admitted_secrets:
                self.forbidden.update(_forms(value))

    def token(self, token: str) -> str:
        """Register a minted token's signature as never to be shown (the token itself is
        found by its shape, :data:`TOKEN`); answer the token."""
        try:
            self.signatures.add(decode_token(token).signature)
        except Exception:
            pass
        return token

    def admit_secret(self, value: str, owner: Owner) -> None:
        """``value`` is placed in ``owner``'s documents on purpose (see the module doc)."""
        for form in _forms(value):
            self.forbidden.discard(form)
            self.admitted_secrets[form] = (value, owner)

    def grant_id(self, tenant: str, application: str, rand: str) -> str:
        """A grant id whose appearance outside its tenant's application is a leak."""
        number = len(self.grant_owners) + 1
        self.grant_owners[number] = (tenant, application)
        return f"gr{number}z{rand}"

    def marker(self, owner: Owner, number: int, rand: str) -> str:
        self.marker_owners[number] = owner
        return f"mk{number}z{rand}"

    # ------------------------------------------------------------------ sending

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: Any = None,
        note: str = "",
    ) -> httpx.Response:
        """Send one request (JSON ``body`` unless ``None``) and scan its answer."""
        self.requests += 1
        sent = json.dumps(body) if body is not None else ""
        extra = {"Content-Type": "application/json"} if body is not None else {}
        answer = self.http.request(
            method, url, content=sent.encode() if body is not None else None,
            headers={**headers, **extra},
        )  # fmt: skip
        where = f"{method} {url} [{note}] -> {answer.status_code}"
        if answer.status_code >= 500:
            self.unexpected.append(f"{where}: {answer.text[:300]}")
        # What the request said: its URL, its body and the grant id its token carries.
        said = f"{url} {sent} {_grant_id_of(headers)}"
        self.scan(answer, view_of(headers), said, where)
        return answer

    # ------------------------------------------------------------------ scanning

    def scan(self, answer: httpx.Response, view: View | None, request: str, where: str) -> None:
        text = answer.text
        ok = answer.status_code < 400
        if answer.status_code in (401, 403):
            view = None  # a token the server did not accept for this request sees nothing
        headers = "\n".join(f"{k}: {v}" for k, v in answer.headers.items())
        for value in self._forbidden_in(text + "\n" + headers):
            self.leaks.append(f"{where}: holds forbidden material {value[:24]!r}…")
        for form, (value, owner) in self.admitted_secrets.items():
            if form not in text:
                continue
            if not ok or view is None or not view.admits(owner):
                self.leaks.append(f"{where}: holds an admitted secret of {owner} outside it")
                continue
            for path in _paths_holding(_json_or_none(text), value):
                if DOCUMENT_FIELDS.isdisjoint(path[:-1] if path[-1:] == ("state",) else path):
                    self.leaks.append(f"{where}: an admitted secret at {path}")
        for match in MARKER.finditer(text):
            marked = self.marker_owners.get(int(match.group(1)))
            if marked is None or match.group(0) in request:
                continue
            if view is None or not view.admits(marked):
                self.cross_tenant_reads.append(f"{where}: shows {marked}'s marker")
        for match in GRANT_ID.finditer(text):
            scope = self.grant_owners.get(int(match.group(1)))
            if scope is None or match.group(0) in request:
                continue
            if view is None or scope != (view.tenant, view.application):
                self.cross_tenant_reads.append(f"{where}: shows {scope}'s grant {match.group(0)}")
        for found in set(WORKLOAD_ID.findall(text)):
            whose = self.owners.get(found)
            if whose is None or found in request:
                continue
            if view is None or not view.admits(whose):
                self.cross_tenant_reads.append(f"{where}: shows {whose}'s workload {found}")
        if ok and view is not None:
            document = _json_or_none(text)
            for tenant, application in _tenants_named(document):
                if (tenant, application) != (view.tenant, view.application):
                    self.cross_tenant_reads.append(f"{where}: names {tenant}/{application}")
            self._register_admitted(document, view)

    def _forbidden_in(self, text: str) -> Iterator[str]:
        yield from TOKEN.findall(text)
        for value in self.forbidden:
            if value in text:
                yield value
        for digest in HEX64.findall(text):
            if digest in self.signatures:
                yield digest

    def _register_admitted(self, document: Any, view: View) -> None:
        """Learn the owner of every workload a successful answer shows its caller."""
        for item in _objects(document):
            workload_id = item.get("workload_id")
            if (
                isinstance(workload_id, str)
                and workload_id not in self.owners
                and item.get("tenant_id") == view.tenant
                and item.get("application_id") == view.application
                and isinstance(item.get("environment"), str)
                and isinstance(item.get("definition_id"), str)
            ):
                self.owners[workload_id] = Owner(
                    view.tenant, view.application, item["environment"], item["definition_id"]
                )

    def scan_log(self, log: Path, where: str) -> int:
        """Scan what the server logged since the last call; answers its access-log lines
        (so a log that records nothing is not taken for a clean one)."""
        with log.open("rb") as file:
            file.seek(self.log_offset)
            text = file.read().decode("utf-8", errors="replace")
            self.log_offset = file.tell()
        for value in [*self._forbidden_in(text), *(s for s in self.admitted_secrets if s in text)]:
            line = next((ln for ln in text.splitlines() if value in ln), "")
            self.leaks.append(f"server log ({where}) holds secret material: {line[:200]!r}")
        for match in MARKER.finditer(text):
            self.leaks.append(f"server log ({where}) holds a document's content {match.group(0)}")
        return len(ACCESS_LINE.findall(text))

    # ------------------------------------------------------------------ outcomes

    def expect(self, condition: bool, message: str) -> bool:
        """Count a refusal that went as expected, or keep ``message``."""
        if condition:
            self.refused_as_expected += 1
        else:
            self.unexpected.append(message)
        return condition

    def check(self, condition: bool, message: str) -> bool:
        """Keep ``message`` unless ``condition`` (not a refusal: nothing is counted)."""
        if not condition:
            self.unexpected.append(message)
        return condition

    def figures(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "refused_as_expected": self.refused_as_expected,
            "leaks": len(self.leaks),
            "cross_tenant_reads": len(self.cross_tenant_reads),
            "changed": len(self.changed),
            "unexpected": len(self.unexpected),
        }

    def problems(self) -> list[str]:
        named = (
            ("leak", self.leaks),
            ("cross-tenant read", self.cross_tenant_reads),
            ("changed by a refused request", self.changed),
            ("unexpected answer", self.unexpected),
        )
        return [f"{name}: {text}" for name, found in named for text in found]


def _forms(value: str) -> set[str]:
    """``value`` and the text a JSON string of it holds (quotes, backslashes and control
    characters escaped)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _objects(document: Any) -> Iterator[dict[str, Any]]:
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _tenants_named(document: Any) -> Iterator[tuple[Any, Any]]:
    for item in _objects(document):
        for tenant, application in (("tenant_id", "application_id"), ("tenant", "application")):
            if tenant in item and application in item:
                yield item[tenant], item[application]


def _paths_holding(document: Any, value: str) -> list[tuple[str, ...]]:
    """The paths of every string (or key) of ``document`` that holds ``value``; ``[("?",)]``
    when the answer is not JSON.
    """
    if document is None:
        return [("?",)]
    found: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), document)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if value in key:
                    found.append((*path, key))
                stack.append(((*path, key), child))
        elif isinstance(item, list):
            stack.extend(((*path, str(n)), child) for n, child in enumerate(item))
        elif isinstance(item, str) and value in item:
            found.append(path)
    return found
