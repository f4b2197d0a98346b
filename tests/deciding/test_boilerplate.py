"""The boilerplate rule on its own: which pairs tell two stories, and the sample it reads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.deciding.boilerplate import (
    COUNTED_AT_MOST,
    COUNTED_BELOW,
    DENSER_AT_MOST,
    DENSER_BOUNDS,
    STORIES_KEY,
    STORY_STARTERS,
    ArticleBoilerplate,
    comparable,
    page_furniture,
    posted_bytes,
    sample,
    sample_reference,
    sampled_keys,
    stories_differ,
    stories_match,
    tells_its_own_story,
    template_bar,
    undercounted_template,
    unjudged_from,
    window_templates,
)
from consumer.fingerprint.shingles import (
    encode_shingles,
    low_values,
    low_values_bytes,
    low_values_reference,
)

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


def test_on_a_dense_sample_a_page_sharing_nothing_but_its_template_differs() -> None:
    # A longer page of the site beside one whose story is a line (one key of its own): that
    # reads as a copy cut short, unless the two share nothing but the template, which only a
    # dense sample can tell.
    ours, theirs = TEMPLATE | {1, 2, 3, 4, 5, 6}, TEMPLATE | {9}
    assert stories_differ(ours, theirs, TEMPLATE, 0.5, 2, dense=True)
    assert not stories_differ(ours, theirs, TEMPLATE, 0.5, 2)
    # A story of five sampled shingles could share its half with the other side and have it
    # missed by the sample (one time in 150): that is left to the texts' Jaccard.
    assert not stories_differ(TEMPLATE | {1, 2, 3, 4, 5}, theirs, TEMPLATE, 0.5, 2, dense=True)


def test_on_a_dense_sample_a_copy_cut_short_still_does_not() -> None:
    original = TEMPLATE | {1, 2, 3, 4, 5, 6}
    assert not stories_differ(TEMPLATE | {1}, original, TEMPLATE, 0.5, 2, dense=True)
    # A page of nothing but the template is no copy of a story under it; two such pages are
    # two posts of one notice.
    assert stories_differ(set(TEMPLATE), original, TEMPLATE, 0.5, 2, dense=True)
    assert not stories_differ(set(TEMPLATE), set(TEMPLATE), TEMPLATE, 0.5, 2, dense=True)


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


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(st.integers(0, 2**64 - 1), max_size=2000),
        st.lists(st.integers(0, 2**64 - 1), max_size=300),  # short texts: denser samples
    ),
    st.sampled_from([b"C", b"W"]),
)
def test_the_sample_is_every_value_of_the_text_below_a_shared_bound(
    hashes: list[int], kind: bytes
) -> None:
    """Checked against the whole text, not only the 512 values its record keeps: a text
    samples every one of its values below its bound, and the bound is one that every text
    may take (or, past the cap, the long sample cut at its largest key), so two texts sample
    alike every value they share below the narrower of their bounds."""
    record = encode_shingles(kind, np.array(hashes, dtype=np.uint64))
    everything = sorted({h >> 32 for h in hashes})
    keys, bound = sample(record)
    reference_keys, reference_bound = sample_reference(record)  # the native kernel's reference
    assert (keys.tolist(), bound) == (reference_keys.tolist(), reference_bound)
    assert keys.tolist() == [v for v in everything if v < bound]
    assert sampled_keys(record).tolist() == keys.tolist()
    if bound in DENSER_BOUNDS:
        assert len(keys) <= DENSER_AT_MOST
    elif bound == COUNTED_BELOW:
        assert len(keys) <= COUNTED_AT_MOST
    else:  # a long text, cut to its smallest keys
        assert len(keys) == COUNTED_AT_MOST and bound == keys[-1] + 1 <= COUNTED_BELOW
    # The densest bound that keeps the sample within its cap is taken.
    denser = [b for b in DENSER_BOUNDS if b > bound]
    for b in denser:
        assert sum(v < b for v in everything) > DENSER_AT_MOST or len(everything) > 512


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=2000), st.sampled_from([b"C", b"W"]))
def test_the_native_low_values_are_the_reference(hashes: list[int], kind: bytes) -> None:
    record = encode_shingles(kind, np.array(hashes, dtype=np.uint64))
    values = sorted({h >> 32 for h in hashes})[:512]
    expected = [v for v in values if v < COUNTED_BELOW][:COUNTED_AT_MOST]
    assert low_values(record, COUNTED_BELOW, COUNTED_AT_MOST).tolist() == expected
    assert low_values_reference(record, COUNTED_BELOW, COUNTED_AT_MOST).tolist() == expected
    as_bytes = np.array(expected, dtype="<u4").tobytes()
    assert low_values_bytes(record, COUNTED_BELOW, COUNTED_AT_MOST) == as_bytes
    assert posted_bytes(record) == as_bytes


def test_a_malformed_record_has_no_sample() -> None:
    assert sampled_keys(b"not shingles").tolist() == []
    assert sampled_keys(b"").tolist() == []


def test_samples_are_compared_over_the_range_both_cover() -> None:
    full = np.arange(COUNTED_AT_MOST, dtype=np.uint32) * 10  # capped: covers up to 630
    short = np.array([5, 15, 700, 900], dtype=np.uint32)
    a, b = comparable((full, 631), (short, COUNTED_BELOW))
    assert a.tolist() == full.tolist()
    assert b.tolist() == [5, 15]
    # A short text's denser sample is cut to a long one's bound.
    dense = np.array([5, COUNTED_BELOW - 1, COUNTED_BELOW, 1 << 30], dtype=np.uint32)
    a, b = comparable((dense, 1 << 31), (short, COUNTED_BELOW))
    assert a.tolist() == [5, COUNTED_BELOW - 1]
    assert b.tolist() == short.tolist()


def _dense_pair(
    base_template: int, base_other: int, dense: dict[int, int]
) -> tuple[set[int], np.ndarray, np.ndarray, list[int]]:
    """Two samples sharing `base_template` keys below COUNTED_BELOW that 500 stories carry and
    `base_other` that 2 do, and the dense keys of `dense` (key: count), shared; each has one
    key of its own in the densest range. Returns what `undercounted_template` takes: the keys
    they share, their union, its counts, and the keys 30 stories carry."""
    counts = {i: 500 for i in range(base_template)}
    counts |= {1000 + i: 2 for i in range(base_other)}
    counts |= dense
    own_a, own_b = (1 << 31) - 1, (1 << 31) - 2
    union = np.array(sorted({*counts, own_a, own_b}), dtype=np.uint32)
    frequencies = np.array([counts.get(int(k), 0) for k in union], dtype=np.int64)
    shared = set(union.tolist()) - {own_a, own_b}
    return shared, union, frequencies, union[frequencies >= 30].tolist()


# Dense keys shared by a pair: a template's, counted 29 times by the short pages that reach
# their range, and two of a story both tell, counted once.
DENSE = {(1 << 30) + i: 29 for i in range(10)} | {(1 << 30) + 100: 1, (1 << 30) + 101: 1}


def test_a_template_known_below_is_a_template_where_few_pages_count_it() -> None:
    found = undercounted_template(*_dense_pair(6, 1, DENSE), min_articles=3)
    assert found == [(1 << 30) + i for i in range(10)]


def test_in_each_range_only_keys_near_the_templates_count_are_template() -> None:
    # Per range, from half the median count of the shared keys there: 5 stories carry a
    # phrase beside the template's 29 (not template), and a range further down holds the
    # template at 100 beside a phrase at 40 (not template either).
    dense = DENSE | {(1 << 30) + 200: 5, (1 << 30) + 201: 5}
    dense |= {(1 << 29) + i: 100 for i in range(4)} | {(1 << 29) + 50: 40}
    found = undercounted_template(*_dense_pair(6, 1, dense), min_articles=3)
    assert found == [(1 << 29) + i for i in range(4)] + [(1 << 30) + i for i in range(10)]


def test_a_template_known_only_in_denser_ranges_is_a_template_where_fewer_count_it() -> None:
    # A template of a few dozen words: two keys below COUNTED_BELOW, 12 between 2^28 and 2^29
    # that 102 stories carry, and 20 in the densest range that only the 21 shortest reach.
    densest = {(1 << 31) + i: 21 for i in range(20)} | {(1 << 31) + 100: 1, (1 << 31) + 101: 1}
    dense = {(1 << 28) + i: 102 for i in range(12)} | densest
    found = undercounted_template(*_dense_pair(2, 0, dense), min_articles=3)
    assert found == [(1 << 31) + i for i in range(20)]


def test_without_a_template_known_below_the_dense_counts_stand() -> None:
    # Too few keys of a known template below (a formulaic phrase), or not most of what the
    # two share there: a series of items, not a page template.
    assert not len(undercounted_template(*_dense_pair(4, 0, DENSE), min_articles=3))
    assert not len(undercounted_template(*_dense_pair(6, 7, DENSE), min_articles=3))


def test_a_range_where_a_known_templates_keys_count_as_seldom_as_a_storys_is_not_judged() -> None:
    # The template is known below; from 2^30 on, the shared keys are carried by one story or
    # two (the shortest pages alone reach there): they could be template or story alike.
    seldom = {(1 << 30) + i: 1 for i in range(10)} | {(1 << 30) + 100: 2}
    assert unjudged_from(*_dense_pair(6, 1, seldom), min_articles=3) == 1 << 30
    # Ranges below are judged: there the template's count is known.
    below = {(1 << 29) + i: 40 for i in range(4)} | seldom
    assert unjudged_from(*_dense_pair(6, 1, below), min_articles=3) == 1 << 30
    assert undercounted_template(*_dense_pair(6, 1, below), min_articles=3) == [
        (1 << 29) + i for i in range(4)
    ]
    # Counted by enough stories, or without a template known below, every range is judged.
    assert unjudged_from(*_dense_pair(6, 1, DENSE), min_articles=3) is None
    assert unjudged_from(*_dense_pair(4, 0, seldom), min_articles=3) is None
    # A range where the template's keys reach the bar is judged, though a copy's shared story
    # (counted once or twice) outnumbers them there: found in review.
    story = {(1 << 27) + i: 60 for i in range(4)} | {(1 << 27) + 100 + i: 2 for i in range(6)}
    assert unjudged_from(*_dense_pair(6, 1, story), min_articles=3) is None


def test_the_dense_bar_is_thirty_stories_or_a_twentieth_of_a_window_of_few() -> None:
    assert template_bar(100_000, min_articles=3) == 30
    assert template_bar(270, min_articles=3) == 13.5
    assert template_bar(40, min_articles=3) == 10  # never below 10: a series of items
    assert template_bar(40, min_articles=12) == 12


def test_every_counted_story_counts_the_stories_key_once_and_no_sample_holds_it() -> None:
    # A short text, sampled whole, one of whose shingles hashes to the top value.
    tops = [*range(0, 2**32, 2**26), 2**32 - 1]
    shingles = encode_shingles(b"C", np.array([t << 32 for t in tops], dtype=np.uint64))
    keys = STORY_STARTERS.keys(shingles)
    assert keys.tolist().count(STORIES_KEY) == 1
    assert STORIES_KEY not in sample(shingles)[0].tolist()
    assert not len(STORY_STARTERS.keys(b""))


STORY = set(range(1, 21))


def test_one_story_under_a_template_on_one_side_only_matches() -> None:
    # 20 story keys, one changed in the copy, which carries 20 template keys besides.
    copy = (STORY - {20}) | {21} | TEMPLATE
    assert stories_match(STORY, copy, TEMPLATE, need=0.5)
    # Under two sites' templates, one on each side.
    other = set(range(200, 220))
    assert stories_match(STORY | other, copy, TEMPLATE | other, need=0.5)


def test_a_template_on_both_sides_or_none_leaves_the_texts_to_decide() -> None:
    # The same template on both sides (a same-site repost) never dilutes the texts' Jaccard,
    # nor does a formulaic phrase of four keys on one side.
    assert not stories_match(STORY | TEMPLATE, STORY | TEMPLATE, TEMPLATE, need=0.5)
    phrase = {100, 101, 102, 103}
    assert not stories_match(STORY, STORY | phrase, TEMPLATE, need=0.5)


def test_stories_must_share_enough_keys_by_a_margin() -> None:
    # 14 of 20 story keys in common (Jaccard 0.54, inside the margin above 0.5), then 15 (0.6).
    assert not stories_match(STORY, set(range(7, 27)) | TEMPLATE, TEMPLATE, need=0.5)
    assert stories_match(STORY, set(range(6, 26)) | TEMPLATE, TEMPLATE, need=0.5)
    # Four story keys, all in common: too few to tell a story by.
    assert not stories_match({1, 2, 3, 4}, {1, 2, 3, 4} | TEMPLATE, TEMPLATE, need=0.5)


def furniture_counts(*groups: tuple[set[int], int]) -> dict[int, int]:
    return {key: n for keys, n in groups for key in keys}


# A list of related headlines: 12 keys, each carried by 5 stories (key 300+).
RELATED = set(range(300, 312))


def test_a_list_of_related_headlines_beside_a_template_is_no_story() -> None:
    # The copy of a 20-key story carries a template (20 keys, 400 stories) and a list of
    # related headlines (12 keys, 5 stories each): the list alone keeps the story Jaccard
    # at 19 / 33, under the margin.
    copy = (STORY - {20}) | {21} | TEMPLATE | RELATED
    counts = furniture_counts((STORY | {21}, 1), (TEMPLATE, 400), (RELATED, 5))
    assert not stories_match(STORY, copy, TEMPLATE, need=0.5)
    beside = page_furniture(STORY, copy, TEMPLATE, counts, min_articles=3)
    assert beside == RELATED
    assert stories_match(STORY, copy, TEMPLATE, need=0.5, furniture=beside)
    # Either side may be the page.
    assert page_furniture(copy, STORY, TEMPLATE, counts, min_articles=3) == RELATED


def test_furniture_is_never_more_than_the_story_the_pair_shares() -> None:
    # Two short pages of two sites, each with its template and its list (12 and 6 keys),
    # whose stories share 6 sampled keys and have 2 each of their own: left out, the lists
    # would leave a story Jaccard of 6 / 10 decided on ten keys; they outnumber the story the
    # two share, so they stay, and the pages are no one story.
    other, listed = set(range(500, 520)), set(range(520, 526))
    common, mine, yours = set(range(1, 7)), {40, 41}, {60, 61}
    counts = furniture_counts(
        (common | mine | yours, 1), (TEMPLATE | other, 400), (RELATED | listed, 5)
    )
    a, b = common | mine | other | listed, common | yours | TEMPLATE | RELATED
    templates = TEMPLATE | other
    assert stories_match(a, b, templates, need=0.5, furniture=RELATED | listed)
    beside = page_furniture(a, b, templates, counts, min_articles=3)
    assert not beside
    assert not stories_match(a, b, templates, need=0.5, furniture=beside)
    # With 20 story keys in common, the same lists are furniture.
    story = set(range(1, 21))
    counts |= furniture_counts((story, 1))
    a, b = story | other | listed, story | TEMPLATE | RELATED
    assert page_furniture(a, b, templates, counts, min_articles=3) == RELATED | listed


def test_two_sites_pages_each_have_their_furniture() -> None:
    # Another site's template (20 keys) and list (6 keys) on the original, the first site's
    # on the copy.
    other, listed = set(range(500, 520)), set(range(520, 526))
    counts = furniture_counts((STORY, 1), (TEMPLATE | other, 400), (RELATED | listed, 5))
    original, copy = STORY | other | listed, STORY | TEMPLATE | RELATED
    templates = TEMPLATE | other
    assert not stories_match(original, copy, templates, need=0.5)
    beside = page_furniture(original, copy, templates, counts, min_articles=3)
    assert beside == RELATED | listed
    assert stories_match(original, copy, templates, need=0.5, furniture=beside)
    # A page with more such keys than template keys is a digest: neither page has furniture.
    digest = set(range(600, 630))
    digested = counts | furniture_counts((digest, 3))
    assert not page_furniture(original | digest, copy, templates, digested, min_articles=3)


def test_page_furniture_is_only_that_of_a_story_reposted_under_a_template() -> None:
    copy = STORY | TEMPLATE | RELATED
    counts = furniture_counts((STORY, 1), (TEMPLATE, 400), (RELATED, 5))
    # The plain side is an item of a formulaic series: phrases of its own that others carry.
    phrases = set(range(400, 405))
    series = furniture_counts((STORY, 1), (TEMPLATE, 400), (RELATED, 5), (phrases, 4))
    assert not page_furniture(STORY | phrases, copy, TEMPLATE, series, min_articles=3)
    # A template on neither side.
    assert not page_furniture(STORY, STORY | RELATED, set(), counts, min_articles=3)
    # What they share is mostly carried by other stories: a template the window knows too
    # little of, not their story.
    known_little = furniture_counts((STORY, 6), (TEMPLATE, 400), (RELATED, 5))
    assert not page_furniture(STORY, copy, TEMPLATE, known_little, min_articles=3)
    # More carried keys than template keys: a digest of other stories, not a list beside a
    # template.
    digest = set(range(600, 625))
    digested = counts | furniture_counts((digest, 3))
    assert not page_furniture(STORY, copy | digest, TEMPLATE, digested, min_articles=3)


def test_two_briefs_under_one_template_and_a_widget_on_one_side_are_no_one_story() -> None:
    # Both under a template known below COUNTED_BELOW (6 keys, 102 stories) whose densest
    # keys only the shortest pages reach (20 keys, 21 stories, under the bar of 30); one also
    # carries a widget (30 keys, 60 stories); each has 6 keys of its own story.
    shared = {i: 102 for i in range(6)} | {(1 << 31) + i: 21 for i in range(20)}
    widget = {(1 << 28) + i: 60 for i in range(30)}
    own_a = {(1 << 31) + 100 + i: 1 for i in range(6)}
    own_b = {(1 << 31) + 200 + i: 1 for i in range(6)}
    counts = shared | widget | own_a | own_b
    union = np.array(sorted(counts), dtype=np.uint32)
    frequencies = np.array([counts[k] for k in union.tolist()], dtype=np.int64)
    a = np.array(sorted(shared | widget | own_a), dtype=np.uint32)
    b = np.array(sorted(shared | own_b), dtype=np.uint32)
    ours, theirs = set(a.tolist()), set(b.tolist())
    templates = window_templates(ours, theirs, union, frequencies, 100_000, min_articles=3)
    assert templates == set(shared) | set(widget)
    assert not stories_match(ours, theirs, templates, need=0.5)
    # Taken by the bar alone, the template's densest keys would read as one story.
    by_bar = set(union[frequencies >= 30].tolist())
    assert stories_match(ours, theirs, by_bar, need=0.5)


def test_a_copy_tells_a_story_of_its_own_only_beside_one_of_its_match() -> None:
    rng = np.random.default_rng(5)
    shared, mine, theirs = (rng.integers(0, 2**64, n, dtype=np.uint64) for n in (600, 300, 300))
    copy = encode_shingles(b"C", np.concatenate([shared, mine]))
    match = encode_shingles(b"C", np.concatenate([shared, theirs]))
    cut_short = encode_shingles(b"C", shared)
    assert ArticleBoilerplate(None, copy, 3).tells_its_own_story(match)
    assert not ArticleBoilerplate(None, cut_short, 3).tells_its_own_story(match)
    # Found in review: shingled the other way (by words), the same values are no common
    # ground; nothing of the pair can be compared, so neither tells a story of its own.
    assert not ArticleBoilerplate(None, copy, 3).tells_its_own_story(
        encode_shingles(b"W", np.concatenate([shared, theirs]))
    )
    assert not tells_its_own_story({1, 2, 3, 4}, {1, 2, 3, 4, 5, 6, 7})
    assert tells_its_own_story(set(range(10)), set(range(7, 17)))
