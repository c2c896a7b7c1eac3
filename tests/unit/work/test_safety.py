"""feltdb.work.safety: one table of secret key names, one of value patterns, and the
document check (JSON only, bounded depth, valid text), each row tested both ways.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feltdb.errors import WorkloadError
from feltdb.fields import MAX_JSON_DEPTH
from feltdb.work.safety import (
    EMBEDDED_JSON_CHARS,
    EMBEDDED_JSON_LEVELS,
    SECRET_KEY_NAMES,
    SECRET_VALUE_PATTERNS,
    check_document,
    ensure_safe_text,
    normalized_key,
    secret_key,
    sensitive_text,
)
from feltdb.work.secret_shapes import (
    CONFUSABLE_LETTERS,
    LONG_TEXT_CHARS,
    SECRET_KEY_WORDS,
    SHORT_TEXT_PATTERNS,
    SHORTEST_SECRET,
    WHOLE_SECRET_KEY_NAMES,
)

SECRET_KEYS = [
    "password", "Password", "passwd", "passphrase", "secret", "token", "api_key", "apiKey",
    "api-key", "API_KEY", "private_key", "privateKey", "access_token", "accessToken",
    "refresh_token", "id_token", "auth_token", "session_token", "bearer_token",
    "client_secret", "clientSecret", "secret_key", "secret_access_key", "authorization",
    "Authorization", "cookie", "pwd", "credential", "credentials", "secrets", "passwords",
    "tokens", "pw", "pass", "jwt", "dsn", "private_key_id", "signing_key", "encryption_key",
    "connection_string",
]  # fmt: skip
DISGUISED_SECRET_KEYS = [
    "ｐａｓｓｗｏｒｄ", "pass\u200bword", "pass\u00adword", "pass\u2060word", "pass\tword",
    "password\n", "password:", "pass/word", "PASSWORD", "db_password", "x-api-key",
    "aws_secret_access_key", "userPassword", "csrf_token", "app_secrets", "db_passwords",
    "gcp_private_key_id", "jwt_signing_key", "db_connection_string", "DATA_ENCRYPTION_KEY",
    # The short names, as a key's last word.
    "db_pass", "DB_PASS", "user-pw", "dbPass", "DBPass", "userPW", "user.pw", "smtp pass",
    "sentry_dsn", "auth.jwt", "idJwt", "db_pass_", "ｐｗ", "db_pa\u200bss",
    # Look-alike letters of other scripts: Cyrillic р а е о с, Greek ο Τ Ο Κ Ε Ν ρ α.
    "\u0440\u0430ssword", "\u0430pi_k\u0435y", "t\u03bfken", "\u03a4\u039f\u039a\u0395\u039d",
    "db_\u0440\u0430ss", "\u0441lient_secret", "\u03c1\u03b1ssword", "secr\u0435t\u200b",
]  # fmt: skip
HARMLESS_KEYS = [
    "tokens_used", "token_count", "secretary", "passport", "author", "keyboard", "api",
    "private", "access", "to", "email",
    # Short names inside a word, never its last word.
    "bypass", "BYPASS", "Bypass", "compass", "passenger", "passage", "passes", "throughput",
    "pwm", "jwt_issuer", "dsn_host", "description", "compassPoint",
    # Names that start a key, or count tokens rather than hold them.
    "tokenizer", "tokenize", "password_policy", "password_min_length", "max_tokens",
    "prompt_tokens", "total_tokens", "secret_santa_rules",
    # Other scripts, folded to no secret name: Russian "password" and Greek "key".
    "\u043f\u0430\u0440\u043e\u043b\u044c", "\u03ba\u03bb\u03b5\u03b9\u03b4\u03af",
]  # fmt: skip

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SECRET_VALUES = {
    "private key block": [
        "-----BEGIN PRIVATE KEY-----\nMIIE",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "prefix -----BEGIN DSA PRIVATE KEY----- suffix",
        "-----begin private key-----",
        "BEGIN PRIVATE KEY",
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
    "Stripe webhook secret": ["whsec_" + "a1B2" * 8, "secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZI"],
    "feltdb live key": ["fdb_live_abc", "x fdb_live_1", "FDB_LIVE_abc"],
    "AWS access key id": ["AKIAIOSFODNN7EXAMPLE", "id=ASIAIOSFODNN7EXAMPLE;"],
    "AWS secret access key": [
        AWS_SECRET,
        f"aws_secret_access_key={AWS_SECRET}",
        f'"{AWS_SECRET}"',
        "secret: 9drTJvcXLB89EXAMPLEKEY+hq4NxHkQjKCo4WJKx",
    ],
    "Google API key": ["AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "key=AIza" + "0aB_-" * 7],
    "GitHub token": ["ghp_" + "a1B2" * 9, "gho_" + "z" * 36, "github_pat_" + "A1_" * 10],
    "GitLab token": ["glpat-" + "xY1z" * 5, "token glpat-AbCdEfGhIjKlMnOpQrSt"],
    "npm token": ["npm_" + "a1B2c3" * 6, "//registry.npmjs.org/:_authToken=npm_" + "Z9" * 18],
    "Slack token": ["xoxb-1234567890-abcdef", "xoxp-0000000000-zzzz", "xoxb-12345abcde"],
    "Slack webhook": [
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "post to HOOKS.SLACK.COM/services/T0ABCDEF1/B0ABCDEF2/aBcDeFgHiJkLmNoP",
    ],
    "JSON Web Token": [JWT, f"token={JWT}&x=1"],
    "credentials in a URL": [
        "postgresql://admin:Hunter2Passw0rd@db.example.com/app",
        "https://user:pass@host/path",
        "mysql://root:toor@localhost:3306/db",
        "redis://:s3cr3tpass@redis:6379/0",
        "amqp://guest:guest@rabbit",
        "see git+https://bot:hunter22@git.example.com/x.git",
        "x://:p@h",  # the shortest: as long as SHORTEST_SECRET
    ],
    "bearer credential": [
        "Bearer abcdefghijklmnop.qrstuv",
        "Authorization: Bearer abc.def.ghi-jkl.mno",
    ],
    "basic credential": [
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "proxy-authorization: basic dXNlcjpwYXNzd29yZA==",
        "curl -H 'Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l' https://x",
        '{"Authorization" : "Basic YWxhZGRpbjpvcGVuc2VzYW1l"}',
    ],
    "API key header or parameter": [
        "X-Api-Key: 3f2a9c1e7b4d8f6a0c5e2b9d",
        "x-api-key:a1b2c3d4e5f6a7b8c9d0",
        "https://api.example.com/v1?api_key=0123456789abcdef0123",
        "apiKey = 'Zk3jL0qPz8xWm2nB'",
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
    # Look-alikes of the newer shapes.
    "tokenizer",
    "tokenize the passage, then bypass the compass",
    "The quick brown fox jumps over the lazy dog, and an ordinary sentence follows it.",
    "550e8400-e29b-41d4-a716-446655440000",  # a UUID
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a git SHA: hex, no capital
    "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",  # in capitals: no small letter
    "commit da39a3ee5e6b4b0d3255bfef95601890afd80709 on main",
    "Q2hlY2tUaGlzT3V0SXRJc0p1c3RCYXNlNjQxMjM0",  # 40 base64 characters but no "/" or "+"
    "src/main/java/com/Example1/App/Test/Util.java",  # 40 before the dot, but a path
    "docs/Api2/reference/GettingStarted/Index",
    AWS_SECRET + "AAAA",  # a longer base64 run is no 40-character key
    "ssh://git@github.com/org/repo.git",  # a user, no password
    "https://user@example.com/",
    "https://github.com:443/org/repo",
    "http://host:8080/?to=a@b.com",
    "postgresql://admin:****@db.example.com/app",
    "postgresql://admin:${DB_PASSWORD}@db.example.com/app",
    "postgresql://admin:<password>@db.example.com/app",
    "mailto:someone@example.com",
    "user12@example.com",
    "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",  # an unsigned JWT grants nothing
    "eyJhbGciOiJIUzI1NiJ9",  # a JWT header alone
    "AIza",
    "glpat-short",
    "npm_config_cache",
    "npm install --save-dev npm_package_name",
    "whsec_",
    "https://hooks.slack.com/services/",
    "Basic setup of the authorization server",
    "Authorization: Basic <credentials>",
    "Authorization: Basic base64(user:pass)",
    "X-Api-Key header is required",
    "X-Api-Key: YOUR_API_KEY_HERE",
    "api_key=<your key>",
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    # JSON in a string, without a secret in it.
    '{"max_tokens": 512, "model": "m1"}',
    "[1, 2, 3]",
    '{"password_policy": {"min_length": 12}}',
    "{not json}",
    "[",
    "{}",
    '{"\\ud800": 1}',  # a lone surrogate, escaped: still no secret, and no crash
    "[" * 100_000,
    "[" * 5_000 + "]" * 5_000,  # deeper than the JSON parser goes: text, not JSON
]


def short_id(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}…({len(text)} chars)"


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
    "value", [v for values in SECRET_VALUES.values() for v in values], ids=short_id
)
def test_secret_material_in_a_value_is_refused(value: str):
    assert sensitive_text(value)
    assert refusal({"note": value}).code == "WORKLOAD_SECRET_REJECTED"
    with pytest.raises(WorkloadError) as refused:
        ensure_safe_text(value, "errors")
    assert refused.value.code == "WORKLOAD_SECRET_REJECTED"


@pytest.mark.parametrize("value", HARMLESS_VALUES, ids=short_id)
def test_harmless_text_is_admitted(value: str):
    assert not sensitive_text(value)
    check_document({"note": value}, "input")
    ensure_safe_text(value, "errors")


EXAMPLES = [(name, value) for name, values in SECRET_VALUES.items() for value in values]


@pytest.mark.parametrize(("name", "value"), EXAMPLES, ids=short_id)
def test_each_example_is_found_by_its_own_pattern(name: str, value: str):
    assert re.search(SECRET_VALUE_PATTERNS[name], value), name


def test_each_pattern_starts_with_a_character_it_consumes():
    # secret_shapes' rule for speed: no pattern starts with a group or an assertion, so the
    # engine passes over it in one comparison where it cannot start.
    assert not [name for name, p in SECRET_VALUE_PATTERNS.items() if p.startswith("(")]


def test_the_shortest_secret_is_as_long_as_the_search_starts():
    assert len("x://:p@h") == SHORTEST_SECRET
    assert sensitive_text("x://:p@h")
    assert not sensitive_text("x://:p@")


def test_a_short_text_is_searched_with_every_pattern_that_fits_in_it():
    from re import _parser  # the engine's own parser: the fewest characters a pattern takes

    for name, pattern in SECRET_VALUE_PATTERNS.items():
        fewest = _parser.parse(pattern).getwidth()[0]
        if name not in SHORT_TEXT_PATTERNS:
            assert fewest >= LONG_TEXT_CHARS, name
        # A URL's match starts at "://", after a scheme character its lookbehind requires.
        assert fewest + (name == "credentials in a URL") >= SHORTEST_SECRET, name
    assert SHORT_TEXT_PATTERNS <= set(SECRET_VALUE_PATTERNS)
    short_examples = {name for name, value in EXAMPLES if len(value) < LONG_TEXT_CHARS}
    assert short_examples == SHORT_TEXT_PATTERNS  # each is exemplified by a short text


@pytest.mark.parametrize(
    "unit",
    ["api_key=", "apiKey=", "x-api-key: a", "BEGIN ", "BEGIN PRa", "Bearer -", "a://b:", "x://:",
     "eyJaaaaaaaa.", "Authorization: Basic ", "fgt1.", "aB1/", "{\"a\": ["],
)  # fmt: skip
def test_no_text_takes_time_squared(unit: str):
    # Each unit starts a pattern again inside the last one's run: a pattern that rescans
    # that run for each start (as "api_key=…" and "BEGIN …" once did) grows with the square
    # of the text.
    assert_linear(lambda n: sensitive_text(unit * (n // len(unit))))


def assert_linear(scan: Callable[[int], object], size: int = 50_000) -> None:
    """``scan`` of four times the text costs well under the sixteen times a scan that grows
    with the square of its length would (a ratio of costs, not a speed: the machine's pace
    cancels out; each the best of five, the two sizes measured in turn so that a busy
    moment of a shared machine falls on both alike).
    """

    def once(n: int) -> float:
        started = time.perf_counter()
        scan(n)
        return time.perf_counter() - started

    runs = [(once(size), once(4 * size)) for _ in range(5)]
    small, large = min(run[0] for run in runs), min(run[1] for run in runs)
    assert large < 8 * small + 0.002, f"{size:,}: {small:.4f} s; {4 * size:,}: {large:.4f} s"


@pytest.mark.parametrize(("name", "value"), EXAMPLES, ids=short_id)
def test_a_refusal_names_the_field_never_the_secret_or_its_shape(name: str, value: str):
    refused = refusal({"note": value}, "checkpoint_state")
    assert refused.message == "plaintext secrets are forbidden in workload state (checkpoint_state)"
    assert value not in refused.message and name not in refused.message
    with pytest.raises(WorkloadError) as text_refused:
        ensure_safe_text(value, "errors")
    assert text_refused.value.message == "errors may not contain secret material"


# ------------------------------------------------------------ disguises: invisible, look-alike

FORMAT_CHARACTERS = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e",
                     "\U000e0041"]  # fmt: skip
"""Zero-width space, non-joiner and joiner, word joiner, BOM, soft hyphen, right-to-left
override, a tag letter: all Unicode format characters (Cf)."""


@pytest.mark.parametrize("mark", FORMAT_CHARACTERS, ids=ascii)
@pytest.mark.parametrize(
    "value",
    ["AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1B2" * 9, JWT, AWS_SECRET,
     "postgresql://admin:Hunter2@db/app", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"],
    ids=short_id,
)  # fmt: skip
def test_a_secret_split_by_invisible_format_characters_is_refused(value: str, mark: str):
    assert unicodedata.category(mark) == "Cf"
    split = value[:4] + mark + value[4:8] + mark * 2 + value[8:]
    assert sensitive_text(split)
    assert refusal({"note": split}).code == "WORKLOAD_SECRET_REJECTED"
    assert refusal({split: 1}).code == "WORKLOAD_SECRET_REJECTED"


def test_every_confusable_is_another_scripts_letter_folded_to_a_latin_one_of_its_case():
    assert len(CONFUSABLE_LETTERS) >= 50
    for code, latin in CONFUSABLE_LETTERS.items():
        letter = chr(code)
        assert unicodedata.name(letter).split()[0] in {"CYRILLIC", "GREEK", "LATIN"}, letter
        assert not letter.isascii() and latin.isascii() and latin.isalpha(), letter
        assert letter.isupper() == latin.isupper(), letter
        assert normalized_key(letter) == latin.lower(), letter


def test_every_secret_name_spelled_with_look_alikes_is_still_refused():
    to_look_alike = {latin: chr(code) for code, latin in CONFUSABLE_LETTERS.items()}
    for name in SECRET_KEY_NAMES:
        disguised = "".join(to_look_alike.get(letter, letter) for letter in name)
        capital = "".join(to_look_alike.get(letter, letter) for letter in name.upper())
        assert not disguised.isascii() and not capital.isascii(), name  # some letter swapped
        assert secret_key(disguised) and secret_key(capital), name


# ------------------------------------------------------------------ the short key names


@pytest.mark.parametrize("name", sorted(SECRET_KEY_WORDS))
def test_a_short_name_is_a_secret_only_as_the_keys_last_word(name: str):
    for key in (name, name.upper(), f"db_{name}", f"db-{name}", f"db.{name}", f"db {name}",
                f"db{name.capitalize()}", f"DB{name.capitalize()}", f"db{name.upper()}",
                f"db_{name}_", "k" * 100 + f"_{name}"):  # fmt: skip
        assert secret_key(key), key
    for key in (f"x{name}", f"X{name.upper()}", f"{name}x", f"{name}_id", "k" * 100 + name):
        assert not secret_key(key), key
        check_document({key: 1}, "input")


@pytest.mark.parametrize("name", sorted(WHOLE_SECRET_KEY_NAMES))
def test_a_whole_key_name_is_a_secret_only_as_the_whole_key(name: str):
    assert secret_key(name) and secret_key(name.upper()) and secret_key(f" {name}")
    for key in (f"max_{name}", f"prompt{name.capitalize()}", f"{name}_used"):
        assert not secret_key(key), key


def test_the_stricter_names_are_names_too():
    assert SECRET_KEY_WORDS <= SECRET_KEY_NAMES and WHOLE_SECRET_KEY_NAMES <= SECRET_KEY_NAMES
    assert not SECRET_KEY_WORDS & WHOLE_SECRET_KEY_NAMES


# ------------------------------------------------------------ JSON inside a string

EMBEDDED_SECRETS = [
    '{"password": "x"}',
    ' \n\t[{"pw": 1}]',
    '{"pw":1}',  # shorter than any value pattern
    '["ok", {"nested": {"db_pass": "x"}}]',
    '{"pass\\u0077ord": "x"}',  # the key spelled with an escape
    '{"\\u0440\\u0430ssword": 1}',  # look-alike letters, escaped
    '{"note": "AKIA\\u0049OSFODNN7EXAMPLE"}',  # a value the escape hides from the text search
    '{"outer": "{\\"secret\\": 1}"}',  # JSON in a string in JSON
    json.dumps({"a": json.dumps({"b": json.dumps({"token": 1})})}),  # three levels down
    json.dumps({"pad": "p" * 200_000, "password": "x"}),  # padding does not hide it
]


@pytest.mark.parametrize("value", EMBEDDED_SECRETS, ids=short_id)
def test_json_in_a_string_is_checked_as_a_document(value: str):
    assert sensitive_text(value)
    assert refusal({"note": value}).code == "WORKLOAD_SECRET_REJECTED"
    assert refusal(["x", [value]]).code == "WORKLOAD_SECRET_REJECTED"
    with pytest.raises(WorkloadError):
        ensure_safe_text(value, "errors")
    if len(value) <= 1024:
        assert refusal({value: 1}).code == "WORKLOAD_SECRET_REJECTED"


def test_json_in_a_string_is_looked_into_a_bounded_number_of_levels():
    value = json.dumps({"password": "x"})  # one level: the string is JSON
    for _ in range(EMBEDDED_JSON_LEVELS - 1):
        value = json.dumps([value])  # one more: a JSON array holding that string
    assert sensitive_text(value)
    assert not sensitive_text(json.dumps(value)), "one level deeper is text"


def test_json_in_a_string_is_parsed_up_to_the_document_limit_and_no_further():
    assert EMBEDDED_JSON_CHARS >= 1024 * 1024
    over = json.dumps({"password": "x", "pad": "p" * EMBEDDED_JSON_CHARS})
    assert not sensitive_text(over), "too long to be in a document: text only"
    assert refusal({"note": over}).code == "WORKLOAD_INVALID"  # and over the size limit


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
    # repr names a plain object() by its address: "object()" keeps the ids the same in every
    # process, as pytest-xdist's workers need.
    ids=lambda value: "object()" if type(value) is object else repr(value),
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

    safety._short_refused_key.cache_clear()
    for n in range(200):
        key = f"{n:04d}" + "k" * 1000  # distinct, long, harmless
        check_document({key: 1}, "input")
        assert not secret_key(key)
    assert safety._short_refused_key.cache_info().currsize == 0
    assert secret_key("x-" + "k" * 1000 + "password"), "a long key is still checked"
    assert refusal({"x-" + "k" * 1000 + "_pass": "x"}).code == "WORKLOAD_SECRET_REJECTED"
    assert refusal({"k" * 1000 + "AKIAIOSFODNN7EXAMPLE": 1}).code == "WORKLOAD_SECRET_REJECTED"
    for n in range(safety._CACHED_KEYS + 100):
        check_document({f"key{n}": 1}, "input")
    assert safety._short_refused_key.cache_info().currsize == safety._CACHED_KEYS


@pytest.mark.parametrize(
    "document",
    [
        {"pass": 3, "fail": 1},
        {"tokens": 1234},
        {"usage": {"tokens": 100, "prompt_tokens": 20}},
        {"isPass": True},
        {"second_pass": 1},
        {"jwt": None},
        {"dsn": {"host": "db", "port": 5432}},
    ],
)
def test_a_short_secret_name_holding_no_text_is_admitted(document: dict[str, Any]):
    check_document(document, "input")


@pytest.mark.parametrize(
    "document", [{"pass": "hunter2"}, {"db_pass": "x"}, {"tokens": "abc"}, {"password": 3}]
)
def test_a_short_secret_name_holding_text_is_refused_and_a_long_one_always(
    document: dict[str, Any],
):
    assert refusal(document).code == "WORKLOAD_SECRET_REJECTED"


def test_a_run_of_blanks_after_an_authorization_header_costs_no_time_squared():
    assert_linear(lambda n: check_document({"note": "Authorization:" + " " * n + "x"}, "input"))
