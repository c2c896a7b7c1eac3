"""feltdb.work.safety: one table of secret key names, one of value patterns, and the
document check (JSON only, bounded depth, valid text), each row tested both ways.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feltdb.errors import WorkloadError
from feltdb.fields import MAX_JSON_DEPTH
from feltdb.work.safety import (
    SECRET_KEY_NAMES,
    SECRET_VALUE_PATTERNS,
    check_document,
    ensure_safe_text,
    normalized_key,
    secret_key,
    sensitive_text,
)

SECRET_KEYS = [
    "password", "Password", "passwd", "passphrase", "secret", "token", "api_key", "apiKey",
    "api-key", "API_KEY", "private_key", "privateKey", "access_token", "accessToken",
    "refresh_token", "id_token", "auth_token", "session_token", "bearer_token",
    "client_secret", "clientSecret", "secret_key", "secret_access_key", "authorization",
    "Authorization", "cookie", "pwd", "credential", "credentials",
]  # fmt: skip
DISGUISED_SECRET_KEYS = [
    "ｐａｓｓｗｏｒｄ", "pass\u200bword", "pass\u00adword", "pass\u2060word", "pass\tword",
    "password\n", "password:", "pass/word", "PASSWORD", "db_password", "x-api-key",
    "aws_secret_access_key", "userPassword", "csrf_token",
]  # fmt: skip
HARMLESS_KEYS = [
    "tokens_used", "token_count", "secretary", "passport", "author", "keyboard", "api",
    "private", "access", "to", "email",
]  # fmt: skip

SECRET_VALUES = {
    "private key block": [
        "-----BEGIN PRIVATE KEY-----\nMIIE",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "prefix -----BEGIN DSA PRIVATE KEY----- suffix",
    ],
    "OpenAI-style or Stripe key": [
        "sk-live-0123456789",
        "sk-proj-abcdef0123456789",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "key is sk-abcdefghij0123456789",
        "sk-ant-api03-abcdefgh",
    ],
    "feltdb live key": ["fdb_live_abc", "x fdb_live_1"],
    "AWS access key id": ["AKIAIOSFODNN7EXAMPLE", "id=ASIAIOSFODNN7EXAMPLE;"],
    "GitHub token": ["ghp_" + "a1B2" * 9, "gho_" + "z" * 36, "github_pat_" + "A1_" * 10],
    "Slack token": ["xoxb-1234567890-abcdef", "xoxp-0000000000-zzzz"],
    "bearer credential": [
        "Bearer abcdefghijklmnop.qrstuv",
        "Authorization: Bearer abc.def.ghi-jkl.mno",
    ],
    "feltdb token": ["fgt2.eyJncmFudCI6eyJhcHBsaWNh", "fgt1.eyJncmFudCI6eyJhcHBsaWNh"],
}
HARMLESS_VALUES = [
    "sk-learn",
    "scikit-learn and sk-learn",
    "sk-learn-2024-models",
    "rk-20240115-report",
    "Use Bearer authentication for the API",
    "task-0123456789",
    "desk-0123456789abc",
    "ask_me_anything",
    "Bearer",
    "missing Bearer token",
    "AKIA",
    "ghp_short",
    "fgt2.",
    "BEGIN PUBLIC KEY",
    "-----BEGIN CERTIFICATE-----",
    "",
]


def test_every_value_pattern_has_examples():
    assert set(SECRET_VALUES) == set(SECRET_VALUE_PATTERNS)


def test_every_key_name_is_normalized_and_exemplified():
    assert all(name == normalized_key(name) for name in SECRET_KEY_NAMES)
    assert {normalized_key(k) for k in SECRET_KEYS} == SECRET_KEY_NAMES


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_secret_key_name_is_refused_in_any_spelling(key: str):
    assert secret_key(key)
    refused = refusal({"outer": [{key: "x"}]})
    assert refused.code == "WORKLOAD_SECRET_REJECTED"


@pytest.mark.parametrize("key", DISGUISED_SECRET_KEYS, ids=repr)
def test_a_secret_key_name_is_refused_however_it_is_disguised(key: str):
    assert secret_key(key)
    assert refusal({key: "hunter2"}).code == "WORKLOAD_SECRET_REJECTED"


@pytest.mark.parametrize("key", HARMLESS_KEYS)
def test_a_harmless_key_is_admitted(key: str):
    assert not secret_key(key)
    check_document({key: 1}, "input")


@pytest.mark.parametrize(
    "value", [v for values in SECRET_VALUES.values() for v in values], ids=repr
)
def test_secret_material_in_a_value_is_refused(value: str):
    assert sensitive_text(value)
    assert refusal({"note": value}).code == "WORKLOAD_SECRET_REJECTED"
    with pytest.raises(WorkloadError) as refused:
        ensure_safe_text(value, "errors")
    assert refused.value.code == "WORKLOAD_SECRET_REJECTED"


@pytest.mark.parametrize("value", HARMLESS_VALUES, ids=repr)
def test_harmless_text_is_admitted(value: str):
    assert not sensitive_text(value)
    check_document({"note": value}, "input")
    ensure_safe_text(value, "errors")


# ------------------------------------------------------------------ the document's shape


def refusal(value: Any, field: str = "input") -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        check_document(value, field)
    assert refused.value.details == {"fields": [field]}
    return refused.value


def nested(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def test_the_depth_limit_is_64_and_deeper_is_refused_before_any_recursion():
    check_document(nested(MAX_JSON_DEPTH), "input")
    assert "deeper than 64" in refusal(nested(MAX_JSON_DEPTH + 1)).message
    # Far past the interpreter's recursion limit: still a refusal, never a RecursionError.
    assert refusal(nested(100_000)).code == "WORKLOAD_INVALID"


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), {1: "x"}, {"k": {1, 2}}, b"bytes", object(), ["\ud800"],
     {"\udfff": 1}],
    ids=repr,
)  # fmt: skip
def test_what_is_not_json_text_is_invalid(value: Any):
    assert refusal(value).code == "WORKLOAD_INVALID"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)
    ),
    max_leaves=20,
)


@given(JSON)
def test_plain_json_is_admitted_unless_it_holds_a_secret(value: Any):
    try:
        check_document(value, "input")
    except WorkloadError as error:
        assert error.code == "WORKLOAD_SECRET_REJECTED"


def test_a_document_over_1_mib_of_json_is_refused_and_one_just_under_is_not():
    from feltdb.fields import MAX_DOCUMENT_BYTES

    overhead = len('{"k":""}')
    check_document({"k": "x" * (MAX_DOCUMENT_BYTES - overhead)}, "input")
    assert "over the limit" in refusal({"k": "x" * (MAX_DOCUMENT_BYTES - overhead + 1)}).message
    assert "over the limit" in refusal(list(range(300_000))).message  # numbers count too
    assert "over the limit" in refusal({"k": "é" * (MAX_DOCUMENT_BYTES // 2)}).message  # bytes


def test_an_object_key_over_1024_characters_is_refused_before_any_other_check():
    from feltdb.fields import MAX_KEY_CHARS

    check_document({"k" * MAX_KEY_CHARS: 1}, "input")
    refused = refusal({"nested": [{"k" * (MAX_KEY_CHARS + 1): 1}]})
    assert refused.code == "WORKLOAD_INVALID"
    assert refused.details == {"fields": ["input"]}
    assert "object key of 1,025 characters, over the limit of 1,024" in refused.message
    # Even a key that would also be refused as a secret is refused for its length first.
    assert "over the limit" in refusal({"password" + "x" * MAX_KEY_CHARS: 1}).message


def test_only_short_keys_are_remembered_so_long_keys_pin_no_memory():
    from feltdb.work import safety

    safety._short_secret_key.cache_clear()
    for n in range(200):
        key = f"{n:04d}" + "k" * 1000  # distinct, long, harmless
        check_document({key: 1}, "input")
        assert not secret_key(key)
    assert safety._short_secret_key.cache_info().currsize == 0
    assert secret_key("x-" + "k" * 1000 + "password"), "a long key is still checked"
    for n in range(safety._CACHED_KEYS + 100):
        secret_key(f"key{n}")
    assert safety._short_secret_key.cache_info().currsize == safety._CACHED_KEYS
