"""feltdb.auth.signing: HMAC-SHA256 grant signatures, and what verification refuses."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from feltdb import (
    Grant,
    GrantConstraints,
    GrantSigner,
    GrantStatus,
    ResourceScope,
    ResourceScopeKind,
    SignedGrant,
    Subject,
    WorkloadError,
)
from feltdb.records.codec import stored_document

SECRET = bytes([1] * 32)
ISSUED_AT = 100
EXPIRES_AT = 200


def make_grant(**overrides: Any) -> Grant:
    fields: dict[str, Any] = dict(
        contract_version=1,
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.agent("a1"),
        tenant_id="t",
        application_id="app",
        capabilities={"workload:execute"},
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/*")],
        constraints=GrantConstraints(),
        issued_at=ISSUED_AT,
        expires_at=EXPIRES_AT,
        parent_grant=None,
        revision=1,
        status=GrantStatus.ACTIVE,
    )
    fields.update(overrides)
    return Grant(**fields)


def tampered(signed: SignedGrant, **changes: Any) -> SignedGrant:
    """``signed`` with its grant's fields changed and its signature kept."""
    grant = Grant(**{**msgspec.structs.asdict(signed.grant), **changes})
    return SignedGrant(grant=grant, key_id=signed.key_id, signature=signed.signature)


@pytest.fixture
def signer() -> GrantSigner:
    return GrantSigner("k", SECRET)


def refusal(signer: GrantSigner, signed: SignedGrant, now: int) -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        signer.verify(signed, now)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    return refused.value


# ------------------------------------------------------------------ round trip


def test_a_signed_grant_verifies_and_answers_the_grant(signer):
    grant = make_grant()
    signed = signer.sign(grant)
    assert signed.key_id == "k"
    assert signed.grant == grant
    assert signer.verify(signed, ISSUED_AT + 1) == grant


def test_the_signature_is_lowercase_hex_sha256(signer):
    signature = signer.sign(make_grant()).signature
    assert len(signature) == 64
    assert signature == signature.lower()
    int(signature, 16)


def test_signing_is_deterministic(signer):
    assert signer.sign(make_grant()) == GrantSigner("k", SECRET).sign(make_grant())


def test_a_signed_grant_survives_a_json_round_trip(signer):
    signed = signer.sign(make_grant(capabilities={"b", "a"}))
    again = SignedGrant.parse_json(stored_document(signed)[1])
    assert signer.verify(again, ISSUED_AT) == signed.grant


def test_the_signature_does_not_depend_on_set_order(signer):
    one = signer.sign(make_grant(capabilities=["a", "b", "c"]))
    two = signer.sign(make_grant(capabilities=("c", "b", "a")))
    assert one.signature == two.signature


def test_different_grants_have_different_signatures(signer):
    assert signer.sign(make_grant()).signature != signer.sign(make_grant(id="g2")).signature


# ------------------------------------------------------------------ tampering


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            {"capabilities": {"workload:execute", "workload:approve"}}, id="capabilities-added"
        ),
        pytest.param({"capabilities": set()}, id="capabilities-removed"),
        pytest.param({"expires_at": EXPIRES_AT + 1}, id="expires_at"),
        pytest.param({"issued_at": ISSUED_AT - 1}, id="issued_at"),
        pytest.param({"subject": Subject.agent("a2")}, id="subject-id"),
        pytest.param({"subject": Subject.human("a1")}, id="subject-kind"),
        pytest.param({"issuer": Subject.human("mallory")}, id="issuer"),
        pytest.param({"tenant_id": "t2"}, id="tenant"),
        pytest.param({"application_id": "app2"}, id="application"),
        pytest.param({"id": "g2"}, id="id"),
        pytest.param({"revision": 2}, id="revision"),
        pytest.param({"parent_grant": "g0"}, id="parent_grant"),
        pytest.param(
            {"resources": [ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://*")]},
            id="resources",
        ),
        pytest.param(
            {"constraints": GrantConstraints(environments={"production"})}, id="constraints"
        ),
    ],
)
def test_tampering_with_any_field_fails_verification(signer, changes):
    signed = signer.sign(make_grant())
    error = refusal(signer, tampered(signed, **changes), ISSUED_AT + 1)
    assert "signature" in error.message


def test_a_tampered_signature_fails_verification(signer):
    signed = signer.sign(make_grant())
    flipped = ("0" if signed.signature[0] != "0" else "1") + signed.signature[1:]
    forged = SignedGrant(grant=signed.grant, key_id="k", signature=flipped)
    assert "signature" in refusal(signer, forged, ISSUED_AT + 1).message


def test_an_empty_signature_fails_verification(signer):
    forged = SignedGrant(grant=make_grant(), key_id="k", signature="")
    refusal(signer, forged, ISSUED_AT + 1)


# ------------------------------------------------------------------ keys


def test_a_grant_signed_under_another_key_id_is_refused(signer):
    signed = GrantSigner("other", SECRET).sign(make_grant())
    error = refusal(signer, signed, ISSUED_AT + 1)
    assert "other" in error.message


def test_a_grant_signed_with_another_secret_is_refused(signer):
    signed = GrantSigner("k", bytes([2] * 32)).sign(make_grant())
    refusal(signer, signed, ISSUED_AT + 1)


def test_relabelling_the_key_id_does_not_help(signer):
    signed = GrantSigner("other", bytes([2] * 32)).sign(make_grant())
    relabelled = SignedGrant(grant=signed.grant, key_id="k", signature=signed.signature)
    refusal(signer, relabelled, ISSUED_AT + 1)


@pytest.mark.parametrize("length", [0, 1, 15])
def test_a_short_secret_is_refused(length):
    with pytest.raises(WorkloadError) as refused:
        GrantSigner("k", bytes(length))
    assert refused.value.code == "WORKLOAD_INVALID"
    assert "16" in refused.value.message


def test_a_sixteen_byte_secret_is_enough():
    signer = GrantSigner("k", bytes(range(16)))
    assert signer.verify(signer.sign(make_grant()), ISSUED_AT) == make_grant()


def test_an_empty_key_id_is_refused():
    with pytest.raises(WorkloadError) as refused:
        GrantSigner("", SECRET)
    assert refused.value.code == "WORKLOAD_INVALID"


# ------------------------------------------------------------------ validity window


def test_a_grant_is_valid_from_its_issue_until_just_before_its_expiry(signer):
    signed = signer.sign(make_grant())
    assert signer.verify(signed, ISSUED_AT) == signed.grant
    assert signer.verify(signed, EXPIRES_AT - 1) == signed.grant


def test_a_grant_is_expired_at_its_expiry_instant(signer):
    signed = signer.sign(make_grant())
    assert "expired" in refusal(signer, signed, EXPIRES_AT).message
    assert "expired" in refusal(signer, signed, EXPIRES_AT + 1000).message


def test_a_grant_is_not_valid_before_its_issue(signer):
    signed = signer.sign(make_grant())
    assert "not valid yet" in refusal(signer, signed, ISSUED_AT - 1).message


@pytest.mark.parametrize("status", [GrantStatus.REVOKED, GrantStatus.SUSPENDED])
def test_a_grant_that_is_not_active_is_refused_even_when_validly_signed(signer, status):
    signed = signer.sign(make_grant(status=status))
    assert status.value in refusal(signer, signed, ISSUED_AT + 1).message


def test_reactivating_a_revoked_grant_breaks_its_signature(signer):
    signed = signer.sign(make_grant(status=GrantStatus.REVOKED))
    assert (
        "signature"
        in refusal(signer, tampered(signed, status=GrantStatus.ACTIVE), ISSUED_AT + 1).message
    )


# ------------------------------------------------------------------ the two domains


def test_an_evidence_signature_is_never_a_token_signature_and_back():
    signer = GrantSigner("k", SECRET)
    grant = make_grant()
    evidence, token = signer.sign(grant), signer.sign_token(grant)
    assert evidence.signature != token.signature
    assert signer.verify(evidence, ISSUED_AT) == grant
    assert signer.verify_token(token, ISSUED_AT) == grant
    for wrong, check in ((evidence, signer.verify_token), (token, signer.verify)):
        with pytest.raises(WorkloadError) as refused:
            check(wrong, ISSUED_AT)
        assert refused.value.code == "WORKLOAD_UNAUTHORIZED"


@pytest.mark.parametrize("signature", ["é" * 64, "\u2603", "\ud800", ""])
def test_a_signature_of_any_text_is_refused_not_a_crash(signature: str):
    signer = GrantSigner("k", SECRET)
    forged = SignedGrant(grant=make_grant(), key_id="k", signature=signature)
    for check in (signer.verify, signer.verify_token):
        with pytest.raises(WorkloadError) as refused:
            check(forged, ISSUED_AT)
        assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
