"""What an access-log record keeps of a request's path: what the client sent, escaped so
it can start no line of its own, and bounded.
"""

from __future__ import annotations

from feltdb.server.metrics import MAX_LOGGED_PATH_CHARS, loggable_path


def test_percent_escapes_stay_escaped_and_control_characters_are_shown_escaped():
    scope = {"path": "/v1/x\nINFO: forged", "raw_path": b"/v1/x%0aINFO:%20forged"}
    assert loggable_path(scope) == "/v1/x%0aINFO:%20forged"
    assert loggable_path({"raw_path": b"/v1/a\r\nb\x7f"}) == "/v1/a\\x0d\\x0ab\\x7f"
    assert loggable_path({"path": "/v1/decoded\n"}) == "/v1/decoded\\x0a"


def test_a_long_path_is_cut():
    logged = loggable_path({"raw_path": b"/" + b"a" * 10_000})
    assert len(logged) == MAX_LOGGED_PATH_CHARS + 1
    assert logged.endswith("…")
