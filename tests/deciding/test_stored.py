"""The decision as the service stores it in the index record's payload: it round-trips, and
its cheap readers agree with the full one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stored_strategies import stored_decisions

from consumer.deciding import stored
from consumer.deciding.stored import StoredDecision, StoredFormatError

texts = st.text(max_size=30)
decisions = stored_decisions(
    texts, st.one_of(st.none(), st.integers(-(2**62), 2**62)), max_corrections=4
)


@given(article_id=texts, decision=decisions, own=st.booleans())
def test_a_stored_decision_round_trips(article_id, decision, own):
    if own:
        decision = StoredDecision(**{**_fields(decision), "cluster_id": article_id})
    payload = stored.encode(article_id, decision)
    assert stored.decode(article_id, payload) == decision
    assert stored.cluster_of(article_id, payload) == decision.cluster_id
    assert stored.is_own_cluster(payload) == (decision.cluster_id == article_id)


def test_a_payload_of_other_code_is_not_a_decision():
    for payload in (b"", b"src", bytes([2]) + bytes(20)):
        assert stored.decode_or_none("a", payload) is None
        with pytest.raises((StoredFormatError, ValueError)):
            stored.decode("a", payload)


def _fields(decision: StoredDecision) -> dict:
    return {name: getattr(decision, name) for name in StoredDecision.__slots__}
