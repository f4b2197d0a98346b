"""Boilerplate learned from the feed: text that many unrelated stories carry is no evidence of
copying.

Scraped pages bring their site's template into the text: a footer of disclaimers, an appeal
for donations, a subscription prompt, navigation, a list of related headlines. Two unrelated
short stories under one long template share more than half of their shingles, and a copy of
either would join them into one cluster. They are told apart once the template is known for
what it is: shingles that many stories of the window carry.

What is counted. Every article that starts a cluster counts a sample of its shingle hashes: all
of them below a bound that is the same for every text, so that two texts sample a shingle they
share alike (`sample`): the densest of `DENSER_BOUNDS` that leaves it at most `DENSER_AT_MOST`
keys, else `COUNTED_BELOW`, a 32nd of the 32-bit hash space (at most `COUNTED_AT_MOST` keys). A
story of a sentence or two under a long template needs the dense sample to keep keys of its
own. A copy counts nothing, so a story reposted fifty times is counted once, while a template is
counted once for every story it wraps; but for a copy that tells a story of its own beside
what it shares with its match (`tells_its_own_story`): pages of one site whose stories are
shorter than its template are copies of each other until the template is known, and would
keep it from ever being known if they counted nothing. The index keeps the counts over its window
(indexstore/frequencies.py), derived from the rows it stores: they survive a crash, a restore
from the changelog and a rebuild with them, and since they change only as articles are decided
in event-time order, decisions through Kafka are still those of `check`.

What it changes. A pair that shares boilerplate is judged on its stories as well, in two views,
and is no copy if either says so. On the long sample's keys (below `COUNTED_BELOW`), a key
carried by at least `[match] boilerplate_min_articles` of those articles is boilerplate; on the
dense samples both texts have (short ones), only a template is: a key carried by at least
`DENSER_MIN_ARTICLES`. If in a view each has a story of its own (`MIN_OWN_KEYS`, on a dense
sample `MIN_OWN_DENSE_KEYS`, sampled shingles outside boilerplate that the other lacks) and their
stories, the sampled shingles outside boilerplate, have a Jaccard below `[match] min_jaccard`,
they are no copies, however much their texts share. Every other pair is judged on the Jaccard
of its texts as before, so this rule only ever takes flags away, and only from pairs that share
boilerplate: a copy cut short (no story of its own), two posts of one notice (no story outside
boilerplate at all) and a copy of formulaic news are still found. The story sample is a few
dozen shingles: near the threshold it errs either way, which is why it only takes flags away
from pairs whose texts are alike mostly through what many stories carry. An article that is
itself mostly boilerplate in its long sample (`SKETCH_TRUST_SHARE`) is never accepted on its
sketch's estimate alone, which counts the template in: its candidates go to the shingle hashes
and this rule.

One rule gives flags: a copy that carries a page template on one side only, or another site's
on each, can have texts sharing less than `[match] min_jaccard` however little it was edited.
Its pair is a copy when, left without the window's templates (and a page's furniture, such as
its list of related headlines: `page_furniture`), the two samples tell one story by a clear
margin (`stories_match`, the constants below `KNOWN_TEMPLATE_KEYS`). Such a copy is
often a candidate of neither SimHash nor bands, both taken over the whole text: the index also
posts every article under the shingle values of its long sample's range (`posted_keys`), and
an article asks for those of its own that few stories of the window carry, which no template's
are (`MIN_SHARED_RARE_KEYS`, consumer/deciding/rules.py). The sketch, which counts the
templates in, does not refuse a candidate found so; of a SimHash or band candidate the rule
reaches only the pairs the sketch does not refuse first (an estimate at most `[match]
verify_margin` below `min_jaccard`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from functools import lru_cache
from statistics import median

import numpy as np

from consumer.deciding import stored
from consumer.fingerprint.shingles import BOTTOM, low_values, low_values_bytes
from indexstore import Batch

COUNTED_BELOW = 1 << 27
COUNTED_AT_MOST = 64
# A short text samples deeper, from the densest of these bounds that leaves it at most
# `DENSER_AT_MOST` keys (2^32 - 1: every value but one, the same for every text).
DENSER_BOUNDS = (0xFFFFFFFF, 1 << 31, 1 << 30, 1 << 29, 1 << 28)
DENSER_AT_MOST = 128
# From this share of boilerplate in an article's own sample on, a template may carry a sketch
# estimate past the verify margin (0.15): its candidates are settled from the shingle hashes.
SKETCH_TRUST_SHARE = 0.1
# Each of two different stories has at least this many sampled keys the other lacks: a copy cut
# short has none, two posts of one notice (all boilerplate) neither.
MIN_OWN_KEYS = 3
# Compared on their dense samples, two articles are told apart by a template: what at least this
# many stories of the window carry (or `[match] boilerplate_min_articles`, if more). A series of
# formulaic items (an editorial announced in the same words every day, a book out in its fifth
# language) shares phrasing with a few dozen others at most, and its items are copies by their
# texts' Jaccard; a site's template is carried by hundreds of stories a day.
DENSER_MIN_ARTICLES = 30
# A window of few stories (a quiet feed, 72 h of a small site) never sees a template on 30 of
# them: there the bar is `DENSER_WINDOW_SHARE` of the stories the window counts, and never
# below `DENSER_FEWEST_ARTICLES`, more than a series of items reaches in a few days. On the
# templated Reuters feed's 72 h window (some 270 stories counted) it took the flags between
# unrelated pages of one site from 48 to 27.
DENSER_WINDOW_SHARE = 0.05
DENSER_FEWEST_ARTICLES = 10
# Every counted story counts this key beside its sample, which never holds it (a sample holds
# values below 2^32 - 1): its count is the number of stories the window counts.
STORIES_KEY = 0xFFFFFFFF
# On a dense sample, two keys the other lacks make a story of its own: a 100-character brief
# compared with a longer page is sampled at that page's bound, a 16th, which leaves it about
# six, and a copy cut short still has none.
MIN_OWN_DENSE_KEYS = 2
# Two pages that share nothing but their template, on a dense sample, are two stories when
# one of them tells at least this many sampled shingles of a story the other lacks, even if
# the other (a line or two, or a formula the window has seen many times) has no story of its
# own and reads as that page cut short. A copy cut short shares what is left of its story:
# if that is half of what the longer side tells or more (a story Jaccard of 0.5), about as
# many of its shingles are sampled, and at a sixteenth or more all of them are missed about
# once in 400 (e^-6). A shorter cut is missed more often, but by its story it is no
# near-duplicate of the whole. 1,000 of 3,000 cctv items under a 650-character footer made 137
# flags without this rule; with a 400-character blob of base64 above them too, 446.
NOTHING_BUT_TEMPLATE_OWN_KEYS = 6
# A key above `COUNTED_BELOW` is counted only by the stories whose sample reaches it, shorter
# pages the denser it is: on the templated cctv feed a 200-character template carried by 740
# stories counts 295 between 2^29 and 2^30, 29 above 2^30, and two briefs under it took it for
# story there. So when two articles share a template known in the ranges more pages count
# (going from the range every page counts towards the denser ones, at least
# `KNOWN_TEMPLATE_KEYS` of the keys they share so far are carried by a template's count of
# stories, and those are at least half of what they share so far), a key they share in a denser
# range is template too if it is carried by at least half the median count of the keys they
# share in that range: the template's keys there all carry one count, that of its carriers
# short enough to reach the range, and a story's keys next to none. Five keys are about 160
# characters in common below 2^27, 20 when they reach 2^30; the phrasing of a formulaic series
# of items, which must stay a matter of the texts' Jaccard, is rarely that long and that
# common. A template of 70 words under Reuters briefs was known only up to 2^30 (counts
# 85-109, two keys below 2^27) and counted 21 above, under the bar of 30: counting the ranges
# up to 2^30 took the templated feed's 72 h template flags from 27 to 6; in the four-year cctv
# window it also refused 24 flags between items of protocol series ("the premier welcomes the
# prime minister of X", the same words but the names) that the texts' Jaccard grants.
KNOWN_TEMPLATE_KEYS = 5
# A copy of a story that carries a page template on one side only, or another site's template
# on each, can share less than half of its text with the original however little it was
# edited: a 500-character story under a 650-character footer shares about 0.4 of its
# shingles with the story alone. So a pair whose texts share too little is a copy all the same
# when their samples tell one story once the window's templates (`window_templates`) are left
# out:
# at least `ONE_SIDED_TEMPLATE_KEYS` template keys on one side only (a template that one page
# carries and the other does not, not a phrase of a formulaic series), at least
# `MIN_SHARED_STORY_KEYS` story keys in common, and a Jaccard of the story keys at least
# `STORY_MARGIN` above `[match] min_jaccard`: a few dozen sampled keys estimate it with an error
# of about 0.1. On the templated cctv feed it found 29 more copies and no wrong one; without
# the one-sided condition it flagged formulaic series on the plain feed, without the margin 3
# wrong pairs.
# A page's list of related headlines, different on every page, falls short of a template's
# bar and would count as the page's story: `page_furniture` leaves it out, when the pair looks
# like a story reposted under a template (on templated cctv, 20 more copies found, none wrong).
ONE_SIDED_TEMPLATE_KEYS = 5
MIN_SHARED_STORY_KEYS = 5
STORY_MARGIN = 0.1
# Such a copy is often no candidate at all: a template as long as the story moves SimHash 13-26
# bits and leaves fewer than two band keys in common. So every article is also posted under its
# long sample's range of shingle values (below `COUNTED_BELOW`, at most `COUNTED_AT_MOST`: 8 B
# a key, ~0.25 kB for a 1,000-character article), and an article is a candidate of another
# that it shares at least `MIN_SHARED_RARE_KEYS` of the other's rare keys with: those keys
# fewer than `[match] boilerplate_min_articles` stories of the window carry, which no template
# is (every page counts the keys of this range, so a template's count is complete there). On
# the templated cctv feed 74 of the 140 copies missed share at least three such keys, and an
# article has 0.1 such candidates on average.
MIN_SHARED_RARE_KEYS = 3
# A copy counts its sample as an original does when it and its match each have at least this
# share of their samples the other lacks: two stories under one site's template, which share
# more than half of their text before the template is known, and which would otherwise never
# let it be known (each page a copy of the last, counting nothing). A repost edited lightly
# has much less of its own: at a Jaccard of 0.8 an eighth; at most two-thirds Jaccard can
# leave each side a fifth.
OWN_STORY_SHARE = 0.2
# The most two texts can have in common when each has `OWN_STORY_SHARE` of its own.
OWN_STORY_MAX_JACCARD = (1 - OWN_STORY_SHARE) / (1 + OWN_STORY_SHARE)

_NO_KEYS = np.empty(0, dtype=np.uint32)
_BOUNDS = np.array([*DENSER_BOUNDS, COUNTED_BELOW], dtype=np.uint64)
_BOUNDS_LIST = list(DENSER_BOUNDS)
# The ranges of a sample counted by ever fewer stories: below `COUNTED_BELOW`, then between
# consecutive denser bounds.
_RANGE_BOUNDS = _BOUNDS[::-1].tolist()

try:
    from consumer._fastfp import boilerplate_sample as _native_sample
except ImportError:  # installed from source without cargo: `sample_reference` does it
    _native_sample = None


def sample(shingles: bytes) -> tuple[np.ndarray, int]:
    """The sample of an article's shingle hashes that boilerplate is counted and judged on,
    and the bound below which it holds every value of the text.

    Every text holds all its values below one of a few bounds that are the same for every
    text, so that two texts sample a shingle they share alike: the densest bound that leaves
    it at most `COUNTED_AT_MOST` values (and below which its record is complete), else
    `COUNTED_BELOW`, cut to its smallest `COUNTED_AT_MOST` values. A long article samples a
    32nd of its shingles; a short one, which would leave a template's shingles and next to
    none of its own story at that rate, samples up to all of them."""
    if _native_sample is None or not shingles:
        return sample_reference(shingles)
    try:
        raw, bound = _native_sample(
            shingles, _BOUNDS_LIST, DENSER_AT_MOST, COUNTED_BELOW, COUNTED_AT_MOST, BOTTOM
        )
    except ValueError:
        return _NO_KEYS, COUNTED_BELOW
    return np.frombuffer(raw, dtype="<u4"), bound


def sample_reference(shingles: bytes) -> tuple[np.ndarray, int]:
    """`sample`, in Python: the native kernel's reference."""
    if not shingles:
        return _NO_KEYS, COUNTED_BELOW
    try:
        values = low_values(shingles, DENSER_BOUNDS[0], BOTTOM)
    except ValueError:
        return _NO_KEYS, COUNTED_BELOW
    # Below its largest value, a record holds every value of its text; a record of fewer
    # than BOTTOM values holds them all.
    complete_below = DENSER_BOUNDS[0] if len(values) < BOTTOM else int(values[-1])
    below = np.searchsorted(values, _BOUNDS).tolist()
    for bound, n in zip(DENSER_BOUNDS, below, strict=False):
        if bound <= complete_below and n <= DENSER_AT_MOST:
            return values[:n], bound
    n = below[-1]
    if n <= COUNTED_AT_MOST:
        return values[:n], COUNTED_BELOW
    return values[:COUNTED_AT_MOST], int(values[COUNTED_AT_MOST - 1]) + 1


def sampled_keys(shingles: bytes) -> np.ndarray:
    """The sample of an article's shingle hashes that boilerplate is counted on (`sample`)."""
    return sample(shingles)[0]


class StoryStarters:
    """The index's `FrequencyPolicy`: the sampled keys of articles that start a cluster, and
    of copies that tell a story of their own (`tells_its_own_story`)."""

    def counts(self, payload: bytes) -> bool:
        return stored.counts_sample(payload)

    def keys(self, shingles: bytes) -> np.ndarray:
        keys = sampled_keys(shingles)
        return np.append(keys, np.uint32(STORIES_KEY)) if len(keys) else keys

    def posted(self, shingles: bytes) -> bytes:
        return posted_bytes(shingles)


@lru_cache(maxsize=8192)
def posted_bytes(shingles: bytes) -> bytes:
    """`posted_keys` as little-endian u32: asked of each article by the batch's prefetch, its
    search and its put, so kept for a batch's worth of articles."""
    if not shingles:
        return b""
    try:
        return low_values_bytes(shingles, COUNTED_BELOW, COUNTED_AT_MOST)
    except ValueError:
        return b""


def posted_keys(shingles: bytes) -> np.ndarray:
    """The keys every article is posted under in the index: its shingle values below
    `COUNTED_BELOW`, the smallest `COUNTED_AT_MOST` (uint32)."""
    return np.frombuffer(posted_bytes(shingles), dtype="<u4")


STORY_STARTERS = StoryStarters()


def comparable(
    a: tuple[np.ndarray, int], b: tuple[np.ndarray, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Two samples over the same range: the narrower of their bounds."""
    limit = min(a[1], b[1])
    return a[0][a[0] < limit], b[0][b[0] < limit]


def stories_differ(
    ours: set[int],
    theirs: set[int],
    boiler: set[int],
    need: float,
    min_own: int = MIN_OWN_KEYS,
    dense: bool = False,
) -> bool:
    """Whether two articles with these sampled keys, of which `boiler` are boilerplate, tell
    two different stories: they share boilerplate, each has a story of its own (at least
    `min_own` keys the other lacks), and their stories' keys have a Jaccard below `need`.
    On a dense sample (`dense`), also when they share nothing but boilerplate and one of them
    tells a story the other lacks (`NOTHING_BUT_TEMPLATE_OWN_KEYS`)."""
    both = ours & theirs
    if not both & boiler:
        return False
    own = len(ours - theirs - boiler), len(theirs - ours - boiler)
    shared_story = len(both - boiler)
    if dense and not shared_story and max(own) >= NOTHING_BUT_TEMPLATE_OWN_KEYS:
        return True
    if min(own) < min_own:
        return False
    return shared_story < need * (shared_story + sum(own))


class ArticleBoilerplate:
    """One article's boilerplate as the index knows it when the article is decided; what the
    index is asked is asked only when a candidate needs it."""

    __slots__ = ("_batch", "_min_articles", "_sample", "_share", "_shingles")

    def __init__(self, batch: Batch, shingles: bytes, min_articles: int) -> None:
        self._batch = batch
        self._min_articles = min_articles
        self._shingles = shingles if min_articles > 0 else b""
        self._sample: tuple[np.ndarray, int] | None = None
        self._share: float | None = None

    @property
    def _own(self) -> tuple[np.ndarray, int]:
        # Taken when a candidate first needs it: most articles have none that does.
        if self._sample is None:
            self._sample = sample(self._shingles)
        return self._sample

    @property
    def _keys(self) -> np.ndarray:
        return self._own[0]

    @property
    def trusts_sketch(self) -> bool:
        """Whether the article's sketch may accept a candidate on its own."""
        if self._share is None:
            # Asked once per candidate: the share is taken at the first.
            keys = self._keys[self._keys < COUNTED_BELOW]
            boiler = self._batch.frequencies(keys) >= self._min_articles if len(keys) else None
            self._share = 0.0 if boiler is None else float(boiler.mean())
        return self._share < SKETCH_TRUST_SHARE

    def _window_counts(self, union: np.ndarray) -> tuple[np.ndarray, int]:
        """The window's count of each of these keys, and the stories it counts."""
        frequencies = self._batch.frequencies(np.append(union, np.uint32(STORIES_KEY)))
        return frequencies[:-1], int(frequencies[-1])

    def stories_differ(self, candidate_shingles: bytes, need: float) -> bool:
        """`stories_differ` of the article and a candidate, as the window knows their keys:
        on the long sample's keys, or on the dense samples' with a template's count."""
        if not len(self._keys):
            return False
        candidate = sample(candidate_shingles)
        a, b = comparable(self._own, candidate)
        union = np.union1d(a, b)
        if not len(union):
            return False
        frequencies, stories = self._window_counts(union)
        common = union[frequencies >= self._min_articles]
        # A few dozen keys each: Python's sets beat NumPy's set routines at this size.
        ours, theirs = set(a.tolist()), set(b.tolist())
        long_ours = {key for key in ours if key < COUNTED_BELOW}
        long_theirs = {key for key in theirs if key < COUNTED_BELOW}
        if stories_differ(long_ours, long_theirs, set(common.tolist()), need):
            return True
        if min(self._own[1], candidate[1]) <= COUNTED_BELOW:
            return False
        templates = window_templates(ours, theirs, union, frequencies, stories, self._min_articles)
        known = union[frequencies >= template_bar(stories, self._min_articles)].tolist()
        limit = unjudged_from(ours & theirs, union, frequencies, known, self._min_articles)
        if limit is not None:
            ours = {key for key in ours if key < limit}
            theirs = {key for key in theirs if key < limit}
        return stories_differ(ours, theirs, templates, need, MIN_OWN_DENSE_KEYS, dense=True)

    def tells_its_own_story(self, match_shingles: bytes) -> bool:
        """`tells_its_own_story` of the article and the match it is a copy of; never of two
        texts shingled differently (one by words, one by characters), whose samples hold no
        value in common whatever they share."""
        if not len(self._keys) or match_shingles[1:2] != self._shingles[1:2]:
            return False
        a, b = comparable(self._own, sample(match_shingles))
        return tells_its_own_story(set(a.tolist()), set(b.tolist()))

    def stories_match(self, candidate_shingles: bytes, need: float) -> bool:
        """`stories_match` of the article and a candidate whose texts share less than `need`,
        with the window's templates (`window_templates`) and the pages' furniture
        (`page_furniture`)."""
        if not len(self._keys):
            return False
        a, b = comparable(self._own, sample(candidate_shingles))
        ours, theirs = set(a.tolist()), set(b.tolist())
        # Asked of every candidate whose text is refused: what no count can change is settled
        # first, and the sets stand in for NumPy's routines, slower at a few dozen keys.
        if (
            len(ours ^ theirs) < ONE_SIDED_TEMPLATE_KEYS
            or len(ours & theirs) < MIN_SHARED_STORY_KEYS
        ):
            return False
        union = np.array(sorted(ours | theirs), dtype=np.uint32)
        frequencies, stories = self._window_counts(union)
        templates = window_templates(ours, theirs, union, frequencies, stories, self._min_articles)
        counts = dict(zip(union.tolist(), frequencies.tolist(), strict=True))
        beside = page_furniture(ours, theirs, templates, counts, self._min_articles)
        return stories_match(ours, theirs, templates, need, beside)


def tells_its_own_story(ours: set[int], theirs: set[int]) -> bool:
    """Whether a copy and its match, with these samples over one range, each tell a story of
    their own beside what they share: at least `OWN_STORY_SHARE` of each sample, and
    `MIN_OWN_KEYS`, the other lacks."""
    own = len(ours - theirs), len(theirs - ours)
    return min(own) >= MIN_OWN_KEYS and all(
        n >= OWN_STORY_SHARE * len(keys) for n, keys in zip(own, (ours, theirs), strict=True)
    )


def window_templates(
    ours: set[int],
    theirs: set[int],
    union: np.ndarray,
    frequencies: np.ndarray,
    stories: int,
    min_articles: int,
) -> set[int]:
    """The keys of two samples (over the range both cover; `union` their keys, sorted,
    `frequencies` the window's counts of them, `stories` the stories it counts) that are a
    page template's: those `template_bar` stories carry, and those of a template known where
    more pages count that fewer count (`undercounted_template`), which only keys above
    `COUNTED_BELOW`, in dense samples, can be."""
    templates = union[frequencies >= template_bar(stories, min_articles)].tolist()
    if not len(union) or union[-1] < COUNTED_BELOW:
        return set(templates)
    return set(templates).union(
        undercounted_template(ours & theirs, union, frequencies, templates, min_articles)
    )


def stories_match(
    ours: set[int],
    theirs: set[int],
    templates: set[int],
    need: float,
    furniture: set[int] | frozenset[int] = frozenset(),
) -> bool:
    """Whether two articles with these sampled keys, of which `templates` are a page
    template's, tell one story under different templates: a template on one side only
    (`ONE_SIDED_TEMPLATE_KEYS`), at least `MIN_SHARED_STORY_KEYS` story keys in common, and
    their story keys' Jaccard at least `need` + `STORY_MARGIN`. Keys in `furniture`
    (`page_furniture`) are no story either."""
    if len((ours ^ theirs) & templates) < ONE_SIDED_TEMPLATE_KEYS:
        return False
    story_ours, story_theirs = ours - templates - furniture, theirs - templates - furniture
    shared = len(story_ours & story_theirs)
    if shared < MIN_SHARED_STORY_KEYS:
        return False
    return shared >= (need + STORY_MARGIN) * len(story_ours | story_theirs)


def page_furniture(
    ours: set[int],
    theirs: set[int],
    templates: set[int],
    counts: dict[int, int],
    min_articles: int,
) -> set[int]:
    """The keys of a templated page, beside its template and its story, that the other side
    lacks and that at least `[match] boilerplate_min_articles` stories of the window carry
    (the page itself may be one of them): the page's list of related headlines, different on
    every page and so no template's. Empty unless the pair looks like a story reposted under a
    template: at least half of the non-template keys they share are carried by fewer stories
    (their common story, not a template the window knows too little of), and either
    - both sides are pages, each with `ONE_SIDED_TEMPLATE_KEYS` template keys the other
      lacks (two sites' templates): each page's such keys; or
    - one side is a page with `ONE_SIDED_TEMPLATE_KEYS` template keys the other lacks, and
      the other has fewer of its own, and fewer than `ONE_SIDED_TEMPLATE_KEYS` such carried
      keys of its own (a bare story, not an item of a formulaic series): the page's;
    and no page has more such keys than template keys the other lacks, nor the pages together
    more than the story keys they share (a list beside a template and a story, not a digest
    of other stories)."""
    pages = ours - theirs, theirs - ours
    paged = [len(page & templates) for page in pages]
    if max(paged) < ONE_SIDED_TEMPLATE_KEYS:
        return set()
    shared = (ours & theirs) - templates
    rare_shared = sum(counts[key] < min_articles for key in shared)
    if 2 * rare_shared < len(shared):
        return set()
    carried = [{k for k in page - templates if counts[k] >= min_articles} for page in pages]
    if min(paged) >= ONE_SIDED_TEMPLATE_KEYS:
        # A page on each side, two sites' templates: each page's furniture.
        sides = [0, 1]
    else:
        side = 0 if paged[0] >= paged[1] else 1
        if len(carried[1 - side]) >= ONE_SIDED_TEMPLATE_KEYS:
            return set()
        sides = [side]
    if any(len(carried[side]) > paged[side] for side in sides):
        return set()
    furniture = set().union(*(carried[side] for side in sides))
    return furniture if len(furniture) <= rare_shared else set()


def undercounted_template(
    shared: set[int],
    union: np.ndarray,
    frequencies: np.ndarray,
    templates: list[int],
    min_articles: int,
) -> list[int]:
    """The keys two dense samples share (`shared`) that are their template's, although fewer
    than a template's count of stories carry them: what the ranges fewer stories count make of
    a template known in the ranges more of them count (`KNOWN_TEMPLATE_KEYS`). `union` is both
    samples' keys, `frequencies` their counts, `templates` those carried by a template's count
    of stories."""
    return _dense_ranges(shared, union, frequencies, templates, min_articles)[0]


def unjudged_from(
    shared: set[int],
    union: np.ndarray,
    frequencies: np.ndarray,
    templates: list[int],
    min_articles: int,
) -> int | None:
    """Where the ranges begin in which two dense samples' keys cannot be judged, if they do
    (arguments as `undercounted_template`'s): a template is known in the ranges more pages
    count, and in a denser one the keys the pair shares are carried by a median of fewer than
    `[match] boilerplate_min_articles` stories. So few pages of the window reach that range (a
    page of one line under the template, the candidate itself) that its template keys are
    counted as seldom as a story's, and the pair must be judged below it. 300 unrelated cctv
    items under a 400-character blob of base64 flagged 19 when such keys counted as story.
    Where some key there is carried by a template's count, the range's counts tell template
    from story, and it is judged: a copy whose shared story outnumbers its template in a range
    is still one (found in review)."""
    return _dense_ranges(shared, union, frequencies, templates, min_articles)[1]


def _dense_ranges(
    shared: set[int],
    union: np.ndarray,
    frequencies: np.ndarray,
    templates: list[int],
    min_articles: int,
) -> tuple[list[int], int | None]:
    """`undercounted_template` and `unjudged_from`, from one walk through the ranges."""
    # Asked of every pair of dense samples sharing boilerplate: a few dozen keys, on which
    # Python's sets beat NumPy's routines, and most pairs share no template at all.
    known_keys = shared.intersection(templates)
    if len(known_keys) < KNOWN_TEMPLATE_KEYS:
        return [], None
    count = dict(zip(union.tolist(), frequencies.tolist(), strict=True))
    by_range: dict[int, list[int]] = defaultdict(list)
    for key in shared:
        by_range[bisect_right(_RANGE_BOUNDS, key)].append(key)
    # From the range most pages count to the one fewest do, the shared keys carried by a
    # template's count of stories, and all shared keys, so far: once those show a template,
    # every denser range is judged by the template's count there.
    found: list[int] = []
    known = seen = 0
    for r in sorted(by_range):
        keys = by_range[r]
        if known < KNOWN_TEMPLATE_KEYS or 2 * known < seen:
            known += len(known_keys.intersection(keys))
            seen += len(keys)
            continue
        counts = [count[key] for key in keys]
        if median(counts) < min_articles and not known_keys.intersection(keys):
            return sorted(found), _RANGE_BOUNDS[r - 1]
        bar = max(min_articles, median(counts) / 2)
        found += [key for key, n in zip(keys, counts, strict=True) if n >= bar]
    return sorted(found), None


def template_bar(stories: int, min_articles: int) -> float:
    """How many stories carry a template's key on a dense sample, in a window counting
    `stories` stories: `DENSER_MIN_ARTICLES`, or in a window of few stories
    `DENSER_WINDOW_SHARE` of them and at least `DENSER_FEWEST_ARTICLES` (never fewer than
    `[match] boilerplate_min_articles`)."""
    few = max(DENSER_FEWEST_ARTICLES, DENSER_WINDOW_SHARE * stories)
    return max(min_articles, min(DENSER_MIN_ARTICLES, few))
