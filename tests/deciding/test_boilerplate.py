"""The boilerplate rule on its own: which pairs tell two stories, and the sample it reads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.deciding.boilerplate import (
    COUNTED_AT_MOST,
    COUNTED_BELOW,
    comparable,
    sampled_keys,
    stories_differ,
)
from consumer.fingerprint.shingles import encode_shingles, low_values, low_values_reference

TEMPLATE = set(range(100, 120))


def test_two_stories_under_one_template_differ() -> None:
    ours, theirs = TEMPLATE | {1, 2, 3, 4}, TEMPLATE | {5, 6, 7, 8}
    assert stories_differ(ours, theirs, TEMPLATE, 0.5)


def test_a_copy_under_the_template_does_not() -> None:
    ours, theirs = TEMPLATE | {1, 2, 3, 4, 5, 6, 7}, TEMPLATE | {1, 2, 3, 4, 5, 9, 10, 11}
    assert not stories_differ(ours, theirs, TEMPLATE, 0.5)


def test_a_copy_cut_short_has_no_story_of_its_own_and_does_not() -> None:
    original = TEMPLATE | {1, 2, 3, 4, 5, 6}
    assert not stories_differ(TEMPLATE | {1}, original, TEMPLATE, 0.5)


def test_two_posts_of_one_notice_are_boilerplate_through_and_through_and_do_not() -> None:
    assert not stories_differ(set(TEMPLATE), set(TEMPLATE), TEMPLATE, 0.5)


def test_a_pair_sharing_no_boilerplate_is_left_to_its_text() -> None:
    assert not stories_differ({1, 2, 3, 4}, {5, 6, 7, 8}, TEMPLATE, 0.5)


@settings(max_examples=300, deadline=None)
@given(
    ours=st.sets(st.integers(0, 60), max_size=30),
    theirs=st.sets(st.integers(0, 60), max_size=30),
    boiler=st.sets(st.integers(0, 60), max_size=30),
)
def test_less_boilerplate_never_makes_stories_differ(
    ours: set[int], theirs: set[int], boiler: set[int]
) -> None:
    # The rule only takes flags away, and only for what many stories carry: with no key
    # counted as boilerplate, nothing differs.
    assert not stories_differ(ours, theirs, set(), 0.5)
    if stories_differ(ours, theirs, boiler, 0.5):
        assert ours & theirs & boiler


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=2000), st.sampled_from([b"C", b"W"]))
def test_the_sample_is_every_value_below_the_bound_up_to_the_cap(
    hashes: list[int], kind: bytes
) -> None:
    record = encode_shingles(kind, np.array(hashes, dtype=np.uint64))
    values = sorted({h >> 32 for h in hashes})[:512]
    expected = [v for v in values if v < COUNTED_BELOW][:COUNTED_AT_MOST]
    assert sampled_keys(record).tolist() == expected
    assert low_values(record, COUNTED_BELOW, COUNTED_AT_MOST).tolist() == expected
    assert low_values_reference(record, COUNTED_BELOW, COUNTED_AT_MOST).tolist() == expected


def test_a_malformed_record_has_no_sample() -> None:
    assert sampled_keys(b"not shingles").tolist() == []
    assert sampled_keys(b"").tolist() == []


def test_samples_are_compared_over_the_range_both_cover() -> None:
    full = np.arange(COUNTED_AT_MOST, dtype=np.uint32) * 10  # capped: covers up to 630
    short = np.array([5, 15, 700, 900], dtype=np.uint32)
    a, b = comparable(full, short)
    assert a.tolist() == full.tolist()
    assert b.tolist() == [5, 15]
