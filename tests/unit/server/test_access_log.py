"""What an access-log record keeps of a request's path: what the client sent, escaped so
it can start no line of its own, and bounded.
"""

from __future__ import annotations

from feltdb.server.logs import MAX_LOGGED_PATH_CHARS, loggable_path


def test_percent_escapes_stay_escaped_and_control_characters_are_shown_escaped():
    scope = {"path": "/v1/x\nINFO: forged", "raw_path": b"/v1/x%0aINFO:%20forged"}
    assert loggable_path(scope) == "/v1/x%0aINFO:%20forged"
    assert loggable_path({"raw_path": b"/v1/a\r\nb\x7f"}) == "/v1/a\\x0d\\x0ab\\x7f"
    assert loggable_path({"path": "/v1/decoded\n"}) == "/v1/decoded\\x0a"


def test_a_long_path_is_cut():
    logged = loggable_path({"raw_path": b"/" + b"a" * 10_000})
    assert len(logged) == MAX_LOGGED_PATH_CHARS + 1
    assert logged.endswith("…")


def test_a_failure_to_accept_is_said_once_per_interval(monkeypatch):
    import logging

    from feltdb.server import logs

    clock = [1000.0]
    monkeypatch.setattr(logs.time, "monotonic", lambda: clock[0])
    once = logs.AcceptFailuresOnce()

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, None)

    first = record(logs.ACCEPT_FAILURE)
    assert once.filter(first)
    assert not any(once.filter(record(logs.ACCEPT_FAILURE)) for _ in range(500))
    assert once.filter(record("another asyncio error")), "other records pass"
    clock[0] += logs.ACCEPT_FAILURE_EVERY_S
    said = record(logs.ACCEPT_FAILURE)
    assert once.filter(said)
    assert said.getMessage().endswith("(500 more since it was last said)")
