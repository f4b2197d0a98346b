"""Hypothesis strategies for the decision the service stores in an index record
(consumer/deciding/stored.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from consumer.deciding.stored import StoredDecision
from consumer.records import DecisionKind


def stored_decisions(
    texts: st.SearchStrategy[str],
    processed_at: st.SearchStrategy[int | None],
    max_corrections: int,
) -> st.SearchStrategy[StoredDecision]:
    """Any stored decision: kind, cluster id, matched id, distance, late flag, processed_at
    (from `processed_at`), up to `max_corrections` corrected ids, a text length, and whether
    a copy counts its sample."""
    return st.builds(
        StoredDecision,
        st.sampled_from(list(DecisionKind)),
        texts,
        st.one_of(st.none(), texts),
        st.one_of(st.none(), st.integers(0, 64)),
        st.booleans(),
        processed_at,
        st.lists(texts, max_size=max_corrections).map(tuple),
        st.one_of(st.none(), st.integers(0, 2**40)),
        st.booleans(),
    )
