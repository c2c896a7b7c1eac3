"""Issue 13, point 6 (input), bounded: a Hypothesis fuzz of what a requester may put in an
admission's input (deep nesting, long strings, every Unicode code point including lone
surrogates and NUL, NaN and the infinities, integers far beyond 64 bits, odd keys), on
each backend. Every example is either admitted, and read back exactly as given, or
refused with a clear ``WorkloadError`` (invalid, or secret material) that stores nothing;
never another exception. The long run belongs to the soak (not built yet).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.factories import make_request

from feltdb import WorkloadStore
from feltdb.errors import WorkloadError
from feltdb.work.states import WorkloadState

REFUSALS = {"WORKLOAD_INVALID", "WORKLOAD_SECRET_REJECTED"}

scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: far past 64 bits both ways
    | st.floats()  # NaN and the infinities included
    | st.text(max_size=40)  # any code point: lone surrogates, NUL, controls, emoji
    | st.text(alphabet='ab\\"\x00\u2028', min_size=5_000, max_size=20_000)
)
keys = st.text(max_size=12) | st.sampled_from(["password", "token", "__version", "", "id"])
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


inputs = st.dictionaries(keys, documents, max_size=4) | st.integers(0, 200).map(
    lambda depth: {"deep": deep(depth)}
)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON reads them back (a float NaN is never admitted; -0.0 stays -0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=inputs)
def test_an_admission_input_is_admitted_exactly_or_refused_clearly(
    new_target: Callable[..., str], value: Any
) -> None:
    with WorkloadStore.open(new_target("fuzz")) as store:
        before = store.count_by_state().get(WorkloadState.READY, 0)
        key = f"fuzz-{before}-{id(value)}"
        try:
            workload, created = store.admit(make_request(idempotency_key=key, input=value))
        except WorkloadError as error:
            assert error.code in REFUSALS, (error.code, error.message)
            assert error.message.strip()
            assert store.count_by_state().get(WorkloadState.READY, 0) == before
            return
        assert created
        assert same(store.get(workload.workload_id).input, value)
        assert store.count_by_state()[WorkloadState.READY] == before + 1


def test_an_integer_past_64_bits_and_a_nul_are_admitted_and_a_nan_is_refused(
    new_target: Callable[..., str],
) -> None:
    # One example of each outcome, written out, beside the generated ones.
    with WorkloadStore.open(new_target("both")) as store:
        workload, _ = store.admit(
            make_request(idempotency_key="ok", input={"n": 2**80, "s": "\x00"})
        )
        assert store.get(workload.workload_id).input == {"n": 2**80, "s": "\x00"}
        with pytest.raises(WorkloadError) as refused:
            store.admit(make_request(idempotency_key="nan", input={"n": float("nan")}))
        assert refused.value.code == "WORKLOAD_INVALID"
