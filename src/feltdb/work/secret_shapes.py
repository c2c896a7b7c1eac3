"""What secret material looks like: the tables :mod:`feltdb.work.safety` checks against.

- :data:`SECRET_KEY_NAMES`: object key names, normalized (lower case, letters and digits
  only), that name a secret. Most match when they end a key (``db_password``); the short
  ones of :data:`SECRET_KEY_WORDS` only as the key's last word, and those of
  :data:`WHOLE_SECRET_KEY_NAMES` only as the whole key (``feltdb.work.safety`` states the
  rule).
- :data:`CONFUSABLE_LETTERS`: letters of other scripts that pass for Latin ones
  (``раssword`` with a Cyrillic ``р`` and ``а``), folded before a key name is compared.
- :data:`SECRET_VALUE_PATTERNS`: the shapes of secret material in a string, one named
  pattern each.

Tables only: no function here decides anything.
"""

from __future__ import annotations

SECRET_KEY_WORDS = frozenset({"pw", "pass", "jwt", "dsn"})
"""Names too short to tell apart inside a longer word (``bypass``, ``compass``, ``pwm``):
each names a secret only as the whole key or as its last word (``db_pass``, ``user-pw``,
``dbPass``, ``sentry_dsn``)."""

WHOLE_SECRET_KEY_NAMES = frozenset({"tokens"})
"""Names that are a secret's only as the whole key: as a last word they count rather than
hold (``max_tokens``, ``prompt_tokens``, ``total_tokens``)."""

SECRET_KEY_NAMES = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "secret",
        "secrets",
        "token",
        "apikey",
        "privatekey",
        "privatekeyid",
        "signingkey",
        "encryptionkey",
        "connectionstring",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "sessiontoken",
        "bearertoken",
        "clientsecret",
        "secretkey",
        "secretaccesskey",
        "authorization",
        "cookie",
        *SECRET_KEY_WORDS,
        *WHOLE_SECRET_KEY_NAMES,
    }
)
"""Object keys, normalized (:func:`feltdb.work.safety.normalized_key`), whose value is taken
for a secret: a key is a secret's when its normalized form is one of these, or ends with one
that is in neither :data:`SECRET_KEY_WORDS` nor :data:`WHOLE_SECRET_KEY_NAMES`
(``db_password``, ``x-api-key``, ``aws_secret_access_key``, ``db_connection_string``)."""

_CONFUSABLE_PAIRS = (
    # Cyrillic small а е о р с у х і ј ѕ ԁ ԛ ԝ һ ӏ к (U+0430…U+051D).
    ("аеорсухіјѕԁԛԝһӏк", "aeopcyxijsdqwhlk"),
    # Cyrillic capital А В Е К М Н О Р С Т Х У Ѕ І Ј Ԛ Ԝ.
    ("АВЕКМНОРСТХУЅІЈԚԜ", "ABEKMHOPCTXYSIJQW"),
    # Greek small ο α ε ι κ ν ρ τ υ χ γ ω (U+03B1…U+03C9).
    ("οαεικνρτυχγω", "oaeikvptuxyw"),
    # Greek capital Α Β Ε Ζ Η Ι Κ Μ Ν Ο Ρ Τ Υ Χ.
    ("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX"),
    # Latin letters outside ASCII that NFKC keeps: dotless ı and ȷ, script ɑ and ɡ.
    ("ıȷɑɡ", "ijag"),
)
CONFUSABLE_LETTERS: dict[int, str] = {
    ord(letter): latin
    for letters, latins in _CONFUSABLE_PAIRS
    for letter, latin in zip(letters, latins, strict=True)
}
"""A :meth:`str.translate` table: each letter of another script that Unicode's confusables
data (``confusables.txt``) gives as looking like a Latin letter, to that letter, case kept.
A small, written-out subset (the letters an attacker spells ``password`` or ``token``
with), so no dependency; fullwidth and other compatibility forms need no entry, since NFKC
already makes them Latin."""

SECRET_VALUE_PATTERNS: dict[str, str] = {
    # The reference's "BEGIN PRIVATE KEY", in any case and for every key type (up to three
    # words of 16 letters: "SSH2 ENCRYPTED"; unbounded, "BEGIN BEGIN …" took time squared).
    "private key block": r"[Bb](?i:EGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY)",
    # The reference refuses any "sk-…", but "sk-learn" is harmless: a key is "sk-" and 20
    # key characters (OpenAI's have 48 or more), a labelled "sk-live-…"/"sk-proj-…" and 8,
    # or Stripe's "sk_…"/"rk_…" and 12 (Stripe's have 24 or more).
    "OpenAI-style or Stripe key": r"[sr](?<![A-Za-z0-9].)(?:(?<=s)k-(?:[A-Za-z0-9_-]{20,}"
    r"|(?:live|test|proj|ant|admin|svcacct)-[A-Za-z0-9_-]{8,})|k_[A-Za-z0-9_]{12,})",
    "Stripe webhook secret": r"w(?<![A-Za-z0-9_].)hsec_[A-Za-z0-9+/=]{16,}",
    "feltdb live key": r"[Ff](?<![A-Za-z0-9].)(?i:db_live_)",
    "AWS access key id": r"A(?<![A-Z0-9].)[KS]IA[0-9A-Z]{16}(?![A-Z0-9])",
    # 40 base64 characters alone, with a small letter, a capital, a digit and a "/" or "+"
    # (each lookbehind: "not 40 characters all without one"), and fewer than four "/" (the
    # last lookbehind: "not 40 characters from whose start four "/" follow"): a git SHA or
    # other hex has no capital, a word or a base62 id no "/" or "+", a path more "/" (a key
    # has four in about 1 of 300), and a longer base64 run (an image, a hash) is not 40
    # characters between its bounds. Every test comes after the 40 characters, so the
    # usual word costs a failed count, not a scan per test.
    "AWS secret access key": r"[A-Za-z0-9/+](?<![A-Za-z0-9/+].)[A-Za-z0-9/+]{39}"
    r"(?![A-Za-z0-9/+=])(?<![A-Z0-9/+]{40})(?<![a-z0-9/+]{40})(?<![A-Za-z/+]{40})"
    r"(?<![A-Za-z0-9]{40})(?<!(?=(?:[A-Za-z0-9+]*/){4})[A-Za-z0-9/+]{40})",
    "Google API key": r"A(?<![A-Za-z0-9_-].)Iza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
    "GitHub token": r"g(?<![A-Za-z0-9].)(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,})",
    "GitLab token": r"g(?<![A-Za-z0-9_-].)lpat-[A-Za-z0-9_-]{20,}",
    "npm token": r"n(?<![A-Za-z0-9_].)pm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
    "Slack token": r"x(?<![A-Za-z0-9].)ox[abposr]-[A-Za-z0-9-]{10,}",
    "Slack webhook": r"[Hh](?i:ooks\.slack\.com/services/T[A-Z0-9_]{6,}/B[A-Z0-9_]{6,}/"
    r"[A-Z0-9_]{12,})",
    # Header (base64url of '{"'…) and payload of at least 8 more, and a signature of 16: an
    # unsigned token ("…." with nothing after) grants nothing and is left alone.
    "JSON Web Token": r"e(?<![A-Za-z0-9_-].)yJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"\.[A-Za-z0-9_-]{16,}",
    # scheme://user:password@host (or scheme://:password@host), found from its "://"
    # (after a scheme character). User and password hold no character RFC 3986 keeps out
    # of userinfo, so "http://host:8080/?to=a@b" is no credential; a masked "user:****@"
    # or a placeholder "user:${PASSWORD}@" or "user:<password>@" is none either; and
    # "ssh://git@host" has no password.
    "credentials in a URL": r":(?<=[A-Za-z0-9+.-]:)//[^\s/?#@\[\]{}<>:\"'`]*:(?!\*+@)"
    r"[^\s/?#@\[\]{}<>\"'`]+@[A-Za-z0-9\[]",
    # A credential, not the word: 16 token characters with a digit or a punctuation mark.
    "bearer credential": r"[Bb](?<![A-Za-z0-9].)(?i:earer)\s+"
    r"(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{16,}",
    # Only after the header's name (Authorization, Proxy-Authorization): "Basic" alone
    # starts too much English ("Basic setup").
    # One optional quote between the separator and "Basic", and blanks only on each side
    # of it ("\s*[\"']?\s*" split a run of blanks every way: time squared).
    "basic credential": r"[Aa](?<![A-Za-z0-9].)(?i:uthorization)[\"']?\s*[:=]\s*"
    r"(?:[\"']\s*)?(?i:Basic)\s+[A-Za-z0-9+/]{8,}",
    # "X-Api-Key: …", "api_key=…", "apiKey: …": 16 token characters, one a digit (a hex or
    # random key has one; "YOUR_API_KEY" or "<key>" has none). No "=" among them, so the
    # look for a digit stops at the next "api_key=" (with it, "api_key=api_key=…" took
    # time squared).
    "API key header or parameter": r"[Aa](?<![A-Za-z0-9].)(?i:pi[-_]?key)[\"']?\s*[:=]\s*"
    r"[\"']?(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}",
    "feltdb token": r"[Ff](?<![A-Za-z0-9].)(?i:gt)[0-9]+\.\W*[A-Za-z0-9_-]{16,}",
}
"""What secret material looks like in a string: a name for each pattern (for the tests and
the reader; a refusal names only the field, never the pattern or the text) and the
pattern, searched anywhere in the text.

Written for speed, since every string of every document is searched with all of them at
once: each pattern starts with a character it consumes, a literal or a set, spelled in
both cases where case is ignored (``[Bb](?i:EGIN…)``), so that the engine passes over it
in one comparison wherever it cannot start; a bound before the match is a lookbehind
right after that character (``x(?<![A-Za-z0-9].)ox…``: the character before the ``x`` is
no letter or digit). Case is matched as written unless a scoped ``(?i:…)`` says otherwise
(an AWS key id is capitals, a JWT starts ``eyJ``)."""

SHORTEST_SECRET = len("x://:p@h")
"""No pattern matches in a shorter text (the shortest is a password in a URL), so shorter
strings are not searched."""

SHORT_TEXT_PATTERNS = frozenset(
    {
        "private key block",
        "OpenAI-style or Stripe key",
        "feltdb live key",
        "Slack token",
        "credentials in a URL",
    }
)
"""The patterns that can match in a text shorter than :data:`LONG_TEXT_CHARS`: a shorter
string, as most of a document's are (names, ids, dates, addresses), is searched with these
alone, so each new shape of a long secret costs short strings nothing."""
LONG_TEXT_CHARS = 20
"""Every pattern outside :data:`SHORT_TEXT_PATTERNS` needs at least this many characters
(an AWS key id has 20, the others more)."""
