"""feltdb.server.fields: whole-number floats become integers only where the schema says
integer, and the patterns mean what the store means by blank."""

from __future__ import annotations

import re

import pytest

from feltdb.server.fields import NOT_BLANK, integers_as_declared, whole_number
from feltdb.server.openapi import SUBMISSION_SCHEMA


def test_a_whole_float_is_an_integer_where_the_schema_declares_one_and_nowhere_else():
    body = {
        "priority": 5.0,
        "not_before": 100.0,
        "timeouts": {"queue_ms": 2000.0, "claim_ms": None},
        "retry_policy": {"max_attempts": 3.0},
        "input": {"amount": 5.0, "list": [1.0]},
        "idempotency_key": "k",
    }
    converted = integers_as_declared(body, SUBMISSION_SCHEMA)
    assert converted["priority"] == 5 and type(converted["priority"]) is int
    assert type(converted["not_before"]) is int
    assert type(converted["timeouts"]["queue_ms"]) is int
    assert type(converted["retry_policy"]["max_attempts"]) is int
    # The input is hashed as sent: its numbers are never touched.
    assert type(converted["input"]["amount"]) is float
    assert type(converted["input"]["list"][0]) is float


@pytest.mark.parametrize("value", [1.5, "5", True, float("inf"), 2.0**60])
def test_only_a_whole_float_in_the_safe_range_becomes_an_integer(value: object):
    assert whole_number(value) is value


@pytest.mark.parametrize("text", ["", " ", "\t\n", "\x1c", "\u3000", "a\x00"])
def test_not_blank_refuses_what_the_store_calls_blank(text: str):
    assert re.fullmatch(NOT_BLANK, text) is None
    assert not text.strip() or "\x00" in text


@pytest.mark.parametrize("text", ["a", " a ", "ok\u3000", "é"])
def test_not_blank_admits_what_the_store_admits(text: str):
    assert re.fullmatch(NOT_BLANK, text) is not None
