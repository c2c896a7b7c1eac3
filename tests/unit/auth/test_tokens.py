"""feltdb.auth.tokens: bearer tokens and the keyring that signs and verifies them."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feltdb.auth import (
    TOKEN_PREFIX,
    Grant,
    GrantSigner,
    GrantStatus,
    Keyring,
    ResourceScope,
    ResourceScopeKind,
    SignedGrant,
    Subject,
    decode_token,
    encode_token,
)
from feltdb.auth.tokens import MAX_TOKEN_CHARS
from feltdb.errors import WorkloadError
from feltdb.storage.canonical import canonical_json

SECRET = bytes([1] * 32)
OTHER_SECRET = bytes([2] * 32)
ISSUED_AT = 100
EXPIRES_AT = 200
NOW = 150


def make_grant(**overrides: Any) -> Grant:
    fields: dict[str, Any] = dict(
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.worker("w1"),
        tenant_id="t",
        application_id="app",
        capabilities={"workload:claim", "email:send"},
        resources=[ResourceScope(kind=ResourceScopeKind.APPLICATION, uri="flow://app/*")],
        issued_at=ISSUED_AT,
        expires_at=EXPIRES_AT,
    )
    fields.update(overrides)
    return Grant(**fields)


def b64(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def token_of(document: Any) -> str:
    return TOKEN_PREFIX + b64(json.dumps(document))


def unauthorized(call: Any, *args: Any) -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        call(*args)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    return refused.value


def invalid(call: Any, *args: Any) -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        call(*args)
    assert refused.value.code == "WORKLOAD_INVALID"
    return refused.value


@pytest.fixture
def keyring() -> Keyring:
    return Keyring({"k1": SECRET}, "k1")


@pytest.fixture
def signed() -> SignedGrant:
    return GrantSigner("k1", SECRET).sign(make_grant())


# ------------------------------------------------------------------ encoding


def test_a_token_is_the_prefix_and_unpadded_base64url_of_the_canonical_json(signed):
    token = encode_token(signed)
    assert token.startswith("fgt2.")
    body = token[len("fgt2.") :]
    assert re.fullmatch(r"[A-Za-z0-9_-]+", body)
    assert body == b64(canonical_json(signed.to_json()))


def test_a_token_decodes_to_the_signed_grant_it_encodes(signed):
    assert decode_token(encode_token(signed)) == signed


def test_encoding_is_deterministic_whatever_the_set_order():
    signer = GrantSigner("k1", SECRET)
    one = signer.sign(make_grant(capabilities=["a", "b", "c"]))
    two = signer.sign(make_grant(capabilities=("c", "b", "a")))
    assert encode_token(one) == encode_token(two)


def test_decoding_accepts_padding(signed):
    token = encode_token(signed)
    padded = token + "=" * (-len(token[len(TOKEN_PREFIX) :]) % 4)
    assert decode_token(padded) == signed


def test_non_ascii_fields_survive_the_round_trip():
    signed = GrantSigner("k1", SECRET).sign(make_grant(subject=Subject.human("zoë"), id="ü"))
    assert decode_token(encode_token(signed)) == signed


# ------------------------------------------------------------------ malformed tokens

VALID_DOCUMENT = GrantSigner("k1", SECRET).sign(make_grant()).to_json()


def with_grant(**changes: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(VALID_DOCUMENT))
    document["grant"].update(changes)
    return document


MALFORMED = {
    "empty": "",
    "prefix-only": TOKEN_PREFIX,
    "no-prefix": b64(json.dumps(VALID_DOCUMENT)),
    "wrong-version": "fgt9." + b64(json.dumps(VALID_DOCUMENT)),
    "retired-version": "fgt1." + b64(json.dumps(VALID_DOCUMENT)),
    "upper-case-prefix": "FGT1." + b64(json.dumps(VALID_DOCUMENT)),
    "bearer-kept": "Bearer " + token_of(VALID_DOCUMENT),
    "space-inside": TOKEN_PREFIX + " " + b64(json.dumps(VALID_DOCUMENT)),
    "standard-base64-alphabet": TOKEN_PREFIX + "+/+/",
    "not-base64": TOKEN_PREFIX + "!!!!",
    "impossible-length": TOKEN_PREFIX + "AAAAA",
    "padding-inside": TOKEN_PREFIX + "AA=A",
    "not-utf8": TOKEN_PREFIX + b64(b"\xff\xfe\xfd"),
    "not-json": TOKEN_PREFIX + b64("grant please"),
    "json-null": token_of(None),
    "json-list": token_of([VALID_DOCUMENT]),
    "json-string": token_of("fgt1."),
    # The signed grant's own JSON text, as a JSON string: one credential has one form.
    "signed-grant-as-a-json-string": token_of(json.dumps(VALID_DOCUMENT)),
    "json-number": token_of(1),
    "nan": TOKEN_PREFIX + b64(json.dumps(VALID_DOCUMENT)[:-1] + ',"x":NaN}'),
    "deeply-nested": TOKEN_PREFIX + b64("[" * 30_000 + "]" * 30_000),
    "empty-object": token_of({}),
    "no-signature": token_of({k: v for k, v in VALID_DOCUMENT.items() if k != "signature"}),
    "no-key-id": token_of({k: v for k, v in VALID_DOCUMENT.items() if k != "key_id"}),
    "no-grant": token_of({k: v for k, v in VALID_DOCUMENT.items() if k != "grant"}),
    "extra-field": token_of({**VALID_DOCUMENT, "admin": True}),
    "extra-grant-field": token_of(with_grant(admin=True)),
    "string-instant": token_of(with_grant(expires_at="200")),
    "float-instant": token_of(with_grant(expires_at=200.5)),
    "huge-instant": token_of(with_grant(expires_at=2**80)),
    "unknown-status": token_of(with_grant(status="superuser")),
    "unknown-subject-kind": token_of(with_grant(subject={"kind": "root", "id": "x"})),
    "capabilities-a-string": token_of(with_grant(capabilities="workload:claim")),
    "grant-a-list": token_of({**VALID_DOCUMENT, "grant": []}),
    "signature-a-number": token_of({**VALID_DOCUMENT, "signature": 7}),
    "too-long": TOKEN_PREFIX + "A" * MAX_TOKEN_CHARS,
}


@pytest.mark.parametrize("token", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_token_is_unauthorized_and_nothing_else(token, keyring):
    unauthorized(decode_token, token)
    unauthorized(keyring.verify, token, NOW)


@pytest.mark.parametrize("token", [None, b"fgt1.AAAA", 1, ["fgt1."]], ids=repr)
def test_a_token_that_is_not_a_string_is_unauthorized(token, keyring):
    unauthorized(decode_token, token)
    unauthorized(keyring.verify, token, NOW)


def test_the_messages_say_what_is_wrong():
    assert "fgt2." in unauthorized(decode_token, "xyz").message
    assert "retired" in unauthorized(decode_token, MALFORMED["retired-version"]).message
    assert "base64" in unauthorized(decode_token, MALFORMED["not-base64"]).message
    assert "JSON" in unauthorized(decode_token, MALFORMED["not-json"]).message
    assert "signed grant" in unauthorized(decode_token, MALFORMED["no-signature"]).message


@given(st.text(max_size=300))
def test_no_text_makes_decoding_raise_anything_but_unauthorized(text):
    for token in (text, TOKEN_PREFIX + text):
        try:
            decode_token(token)
        except WorkloadError as error:
            assert error.code == "WORKLOAD_UNAUTHORIZED"


@given(st.binary(max_size=300))
def test_no_bytes_behind_the_prefix_make_decoding_raise_anything_but_unauthorized(data):
    try:
        decode_token(TOKEN_PREFIX + b64(data))
    except WorkloadError as error:
        assert error.code == "WORKLOAD_UNAUTHORIZED"


# ------------------------------------------------------------------ the keyring: verify


def test_a_token_the_keyring_signed_verifies_to_its_grant(keyring):
    token = keyring.sign(make_grant())
    assert token.startswith(TOKEN_PREFIX)
    assert decode_token(token).key_id == "k1"
    assert keyring.verify(token, NOW) == make_grant()


def test_a_token_is_valid_from_its_issue_until_just_before_its_expiry(keyring):
    token = keyring.sign(make_grant())
    assert keyring.verify(token, ISSUED_AT) == make_grant()
    assert keyring.verify(token, EXPIRES_AT - 1) == make_grant()
    assert "expired" in unauthorized(keyring.verify, token, EXPIRES_AT).message
    assert "not valid yet" in unauthorized(keyring.verify, token, ISSUED_AT - 1).message


@pytest.mark.parametrize("status", [GrantStatus.SUSPENDED, GrantStatus.REVOKED])
def test_a_signed_but_inactive_grant_is_refused(keyring, status):
    token = keyring.sign(make_grant(status=status))
    assert status.value in unauthorized(keyring.verify, token, NOW).message


def test_a_token_signed_by_an_unknown_key_id_is_refused(keyring):
    token = Keyring({"k9": SECRET}, "k9").sign(make_grant())
    error = unauthorized(keyring.verify, token, NOW)
    assert "key" in error.message


def test_a_token_signed_with_another_secret_under_the_same_key_id_is_refused(keyring):
    token = Keyring({"k1": OTHER_SECRET}, "k1").sign(make_grant())
    assert "signature" in unauthorized(keyring.verify, token, NOW).message


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"capabilities": ["workload:claim", "workload:approve"]}, id="capability"),
        pytest.param({"tenant_id": "t2"}, id="tenant"),
        pytest.param({"application_id": "other"}, id="application"),
        pytest.param({"expires_at": EXPIRES_AT * 100}, id="expiry"),
        pytest.param({"subject": {"kind": "human", "id": "w1"}}, id="subject"),
        pytest.param({"resources": [{"kind": "application", "uri": "flow://*"}]}, id="resources"),
        pytest.param({"status": "active", "revision": 2}, id="revision"),
    ],
)
def test_editing_the_grant_inside_a_token_breaks_its_signature(keyring, changes):
    document = decode_token(keyring.sign(make_grant())).to_json()
    document["grant"].update(changes)
    forged = token_of(document)
    assert "signature" in unauthorized(keyring.verify, forged, NOW).message


def test_relabelling_the_key_id_does_not_help():
    ring = Keyring({"k1": SECRET, "k2": OTHER_SECRET}, "k1")
    document = decode_token(ring.sign(make_grant())).to_json()
    document["key_id"] = "k2"
    unauthorized(ring.verify, token_of(document), NOW)


@given(st.integers(min_value=len(TOKEN_PREFIX)), st.characters(codec="ascii"))
def test_any_one_character_edit_is_refused_or_changes_nothing(position, character):
    ring = Keyring({"k1": SECRET}, "k1")
    token = ring.sign(make_grant())
    position = position % len(token)
    edited = token[:position] + character + token[position + 1 :]
    try:
        grant = ring.verify(edited, NOW)
    except WorkloadError as error:
        assert error.code == "WORKLOAD_UNAUTHORIZED"
    else:
        # base64's last character may carry unused bits: the bytes, hence the grant, are equal.
        assert grant == make_grant()


def test_every_key_of_the_ring_verifies_but_only_the_active_one_signs():
    old = Keyring({"old": SECRET}, "old").sign(make_grant())
    rotated = Keyring({"old": SECRET, "new": OTHER_SECRET}, "new")
    assert rotated.verify(old, NOW) == make_grant()
    assert decode_token(rotated.sign(make_grant())).key_id == "new"
    assert rotated.active == "new"
    assert rotated.key_ids == {"old", "new"}


# ------------------------------------------------------------------ the keyring: making one


def test_a_generated_keyring_has_one_active_random_32_byte_key():
    ring = Keyring.generate()
    assert re.fullmatch(r"k-[0-9a-f]{8}", ring.active)
    assert ring.key_ids == {ring.active}
    secret = json.loads(ring.to_json())["keys"][ring.active]
    assert len(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))) == 32
    assert ring.verify(ring.sign(make_grant()), NOW) == make_grant()


def test_generated_keyrings_differ():
    one, two = Keyring.generate(), Keyring.generate()
    assert one.active != two.active
    unauthorized(two.verify, one.sign(make_grant()), NOW)
    same_id = Keyring.generate("k")
    assert same_id.active == "k"
    unauthorized(Keyring.generate("k").verify, same_id.sign(make_grant()), NOW)


@pytest.mark.parametrize(
    ("keys", "active"),
    [
        pytest.param({}, "k1", id="no-keys"),
        pytest.param({"k1": SECRET}, "k2", id="active-missing"),
        pytest.param({"k1": SECRET, "k2": bytes(15)}, "k1", id="short-secret"),
        pytest.param({"": SECRET}, "", id="empty-key-id"),
    ],
)
def test_an_unusable_keyring_is_invalid(keys, active):
    invalid(Keyring, keys, active)


def test_a_keyring_never_shows_its_secrets():
    ring = Keyring.generate("k1")
    secret = json.loads(ring.to_json())["keys"]["k1"]
    assert "k1" in repr(ring)
    assert secret not in repr(ring)
    assert secret not in str(ring)


# ------------------------------------------------------------------ the keyring: its file


def test_a_saved_keyring_loads_back_and_verifies_its_tokens(tmp_path: Path):
    ring = Keyring({"k1": SECRET, "k2": OTHER_SECRET}, "k2")
    path = tmp_path / "keyring.json"
    ring.save(path)
    loaded = Keyring.load(path)
    assert loaded.active == "k2"
    assert loaded.key_ids == {"k1", "k2"}
    assert loaded.verify(ring.sign(make_grant()), NOW) == make_grant()
    assert ring.verify(loaded.sign(make_grant()), NOW) == make_grant()


def test_the_file_is_the_documented_json(tmp_path: Path):
    path = tmp_path / "keyring.json"
    Keyring({"k1": SECRET}, "k1").save(str(path))
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "active": "k1",
        "keys": {"k1": b64(SECRET)},
    }


@pytest.mark.parametrize("exclusive", [False, True])
def test_the_file_is_private_to_its_owner(tmp_path: Path, exclusive):
    path = tmp_path / "keyring.json"
    Keyring.generate().save(path, exclusive=exclusive)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_saving_over_a_world_readable_file_leaves_it_private(tmp_path: Path):
    path = tmp_path / "keyring.json"
    path.write_text("{}", encoding="utf-8")
    path.chmod(0o644)
    ring = Keyring.generate()
    ring.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert Keyring.load(path).active == ring.active
    assert [p.name for p in tmp_path.iterdir()] == ["keyring.json"]


def test_an_exclusive_save_never_overwrites(tmp_path: Path):
    path = tmp_path / "keyring.json"
    first = Keyring.generate()
    first.save(path, exclusive=True)
    with pytest.raises(FileExistsError):
        Keyring.generate().save(path, exclusive=True)
    assert Keyring.load(path).active == first.active


def test_loading_a_missing_file_raises_file_not_found(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        Keyring.load(tmp_path / "absent.json")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("not json", id="not-json"),
        pytest.param("[]", id="list"),
        pytest.param('{"active": "k1"}', id="no-keys"),
        pytest.param('{"keys": {}}', id="no-active"),
        pytest.param(json.dumps({"active": "k1", "keys": {"k1": b64(SECRET)}, "x": 1}), id="extra"),
        pytest.param(json.dumps({"active": 1, "keys": {"k1": b64(SECRET)}}), id="active-number"),
        pytest.param(json.dumps({"active": "k1", "keys": [b64(SECRET)]}), id="keys-list"),
        pytest.param(json.dumps({"active": "k1", "keys": {"k1": 5}}), id="secret-number"),
        pytest.param(json.dumps({"active": "k1", "keys": {"k1": "!!!"}}), id="secret-not-b64"),
        pytest.param(json.dumps({"active": "k1", "keys": {"k1": b64(b"short")}}), id="short"),
        pytest.param(json.dumps({"active": "k2", "keys": {"k1": b64(SECRET)}}), id="no-such"),
        pytest.param(json.dumps({"active": "k1", "keys": {}}), id="empty-keys"),
    ],
)
def test_a_malformed_keyring_document_is_invalid(text):
    invalid(Keyring.from_json, text)
