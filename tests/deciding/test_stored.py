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
    assert stored.counts_sample(payload) == (decision.cluster_id == article_id or decision.counted)


def test_a_payload_of_other_code_is_not_a_decision():
    for payload in (b"", b"src", bytes([2]) + bytes(20)):
        assert stored.decode_or_none("a", payload) is None
        with pytest.raises((StoredFormatError, ValueError)):
            stored.decode("a", payload)


def _fields(decision: StoredDecision) -> dict:
    return {name: getattr(decision, name) for name in StoredDecision.__slots__}


@given(article_id=texts, decision=decisions)
def test_a_release_that_keeps_no_text_length_skips_it_as_an_id_of_no_article(article_id, decision):
    """Going back to the previous release after this one wrote records: it reads the ids after
    the matched id as this one lays them out, and the text length as one id more, which no
    article has."""
    payload = stored.encode(article_id, decision)
    previous = stored.decode(article_id, bytes([payload[0], payload[1] & ~(1 << 6)]) + payload[2:])
    if decision.text_chars is None:
        assert previous.corrected == decision.corrected
    else:
        first, *rest = previous.corrected
        assert first == f"\0text_chars={decision.text_chars}" and tuple(rest) == decision.corrected
