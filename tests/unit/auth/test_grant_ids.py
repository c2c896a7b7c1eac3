"""Grant ids carry a check, so a revocation can refuse an id feltdb never minted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from feltdb.auth.grants import minted_grant_id, new_grant_id

HEX = "0123456789abcdef"


def test_a_minted_id_is_recognized_and_ids_do_not_repeat():
    ids = {new_grant_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(minted_grant_id(grant_id) for grant_id in ids)
    assert all(len(grant_id) == len("grant_") + 24 for grant_id in ids)


@given(
    position=st.integers(min_value=len("grant_"), max_value=len("grant_") + 23),
    digit=st.sampled_from(HEX),
)
def test_any_one_digit_changed_is_not_an_id_feltdb_minted(position: int, digit: str):
    minted = new_grant_id()
    changed = minted[:position] + digit + minted[position + 1 :]
    assert minted_grant_id(changed) is (changed == minted)


def test_what_is_pasted_in_an_id_s_place_is_not_one():
    minted = new_grant_id()
    for pasted in (
        minted[:-1],
        minted + "0",
        minted.upper(),
        " " + minted,
        "grant_0123",
        "wl_" + minted[len("grant_") :],
        "fgt2.eyJncmFudCI6e30",
        "",
    ):
        assert not minted_grant_id(pasted), pasted


def test_ids_an_earlier_release_minted_are_still_ids_feltdb_minted():
    # Without a check: ``grant issue`` made grant_ and 16 hex digits, the first start's
    # admin grant admin- and 12; a leaked one of them is revoked without force.
    assert minted_grant_id("grant_0123456789abcdef")
    assert minted_grant_id("admin-0123456789ab")
    assert not minted_grant_id("grant_0123456789abcde")
    assert not minted_grant_id("admin-0123456789abc")
