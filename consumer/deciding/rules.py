"""One article's decision against the index: re-delivery, updates, clusters.

- The same id with the same content answers from the article table: the stored decision is
  emitted again (only `source` names the message being answered) and nothing is added.
- The same id with other content is an update: it is searched without itself, then replaces
  its old entry.
- Otherwise the closest earlier article within the distance that passes verification decides
  (exact text first, then the earliest); the article joins that article's cluster or starts
  its own.

Candidates come from three channels of the index: SimHash, every earlier article within the
index's distance (closest first); then, when none of those is accepted, articles that share at
least `band_min_shared` of the 16 band keys (consumer/fingerprint/shingles.py), which finds
copies whose SimHash moved farther (a truncation, an inserted paragraph, many small edits);
then articles sharing rare shingle keys with it, which finds a copy under another page
template (consumer/deciding/boilerplate.py, `MIN_SHARED_RARE_KEYS`).

Verification (`MatchRules`): SimHash at the distance news needs for recall also brings unrelated
articles on the same topic, so a candidate whose text is not identical must also share enough
shingles (or, under a page template on one side only, enough of its story:
consumer/deciding/boilerplate.py). The two articles' 65-byte sketches
(consumer/fingerprint/sketch.py) settle a candidate whose estimate lies clearly above or below
the threshold; one within `verify_margin` of it, and every candidate found by bands alone, is
settled by the 512 smallest shingle hashes of each article, which the index keeps on disk and
reads only then: exact up to 512 shingles, an estimate within ±0.044 (two standard errors at J =
0.5) above. Short texts (headlines, one-line items) are decided on exact text only: two
different headlines that share most of their words are as often different news as the same (the
paraphrase sets of `../shared/data/pairs`), and a 5-gram estimate over a few dozen characters
cannot tell them apart. For the same reason a Latin-script sentence or two (a few dozen word
3-grams) needs a higher estimate; so does a candidate farther away than most copies lie, being
less likely one. Exact, for a short text, means the same letters and digits: a headline reposted
with other punctuation, spacing or leftover markup has another content hash but the same letters
key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from consumer.config import MatchConfig
from consumer.deciding import corrections, stored
from consumer.deciding.boilerplate import (
    MIN_SHARED_RARE_KEYS,
    OWN_STORY_MAX_JACCARD,
    STORY_STARTERS,
    ArticleBoilerplate,
)
from consumer.deciding.stored import StoredDecision
from consumer.fingerprint.shingles import bottom_jaccard
from consumer.fingerprint.sketch import estimate, same_letters, shingled_by_words
from consumer.records import Analyzed, Decision, DecisionKind, Source
from indexstore import ArticleRecord, Batch, Match, SearchResult

# Candidates verified per article, best first: past the first few, a verified one is rare and
# each costs an estimate.
MAX_CANDIDATES = 32
# Articles read around a stored one when decisions are made again: a story's copies lie near
# it, and a story copied more often than this within one window is beyond any feed measured.
NEIGHBOURHOOD = 1024
# Candidates of the rare-keys channel verified per article, most keys shared first.
RARE_KEY_CANDIDATES = 4

# The channel a candidate was found by (`_walk_order`).
BY_SIMHASH, BY_BANDS, BY_RARE_KEYS = 0, 1, 2


@dataclass(frozen=True, slots=True)
class MatchRules:
    """When a candidate within the index's distance is a near-duplicate; the `[match]` options
    (their defaults are `MatchConfig`'s)."""

    min_jaccard: float
    """Shingle Jaccard a candidate needs; 0 accepts every SimHash candidate (plain SimHash)."""
    short_text_chars: int
    """Articles whose normalized text is shorter than this match only an article of the same
    letters and digits."""
    unverifiable_distance: int
    """Without comparable sketches (different shinglings, a record without a sketch), a
    candidate is accepted up to this distance: plain SimHash's classic k."""
    far_distance: int
    far_min_jaccard: float
    """A candidate more than `far_distance` bits away needs `far_min_jaccard` instead: the
    farther a candidate, the less likely a copy, so the same estimate is weaker evidence."""
    sentence_chars: int
    sentence_min_jaccard: float
    """A text shingled by words (Latin script) shorter than `sentence_chars` needs at least
    `sentence_min_jaccard`: a sentence or two is a few dozen word 3-grams, one changed word
    moves three of them, and a rewording with other facts shares half."""
    verify_margin: float
    """A sketch estimate within this of what is needed is settled from the shingle hashes on
    disk (the sketch's standard error is 0.047 at J = 0.5: 0.15 is three of them)."""
    band_min_shared: int
    band_candidates: int
    """Articles sharing at least `band_min_shared` band keys are candidates too, at most
    `band_candidates` of them (most shared first); 0 turns the channel off."""
    boilerplate_min_articles: int
    """Shingles carried by at least this many stories of the window are boilerplate: two
    articles whose stories share little beside them are no copies
    (consumer/deciding/boilerplate.py); 0 turns this off."""


def match_rules(config: MatchConfig) -> MatchRules:
    return MatchRules(
        config.min_jaccard,
        config.short_text_chars,
        config.unverifiable_distance,
        config.far_distance,
        config.far_min_jaccard,
        config.sentence_chars,
        config.sentence_min_jaccard,
        config.verify_margin,
        config.band_min_shared,
        config.band_candidates,
        config.boilerplate_min_articles,
    )


DEFAULT_RULES = match_rules(MatchConfig())


def _accepts(
    rules: MatchRules,
    batch: Batch,
    item: Analyzed,
    match: Match,
    boilerplate: ArticleBoilerplate,
    channel: int = BY_SIMHASH,
) -> bool:
    by_bands = channel != BY_SIMHASH
    if match.exact:
        return True
    if item.text_chars < rules.short_text_chars:
        return same_letters(item.sketch, match.sketch)
    if rules.min_jaccard <= 0:
        return not by_bands
    need = rules.min_jaccard
    if not by_bands and match.distance > rules.far_distance:
        need = rules.far_min_jaccard
    # Either side: a pair compared across shinglings (one of mixed script) is held to the
    # stricter rule, as a pair of two Latin-script sentences would be.
    sentence = shingled_by_words(item.sketch) or shingled_by_words(match.sketch)
    if item.text_chars < rules.sentence_chars and sentence:
        need = max(need, rules.sentence_min_jaccard)
    similarity = estimate(item.sketch, match.sketch)
    if similarity is not None:
        # A candidate found by rare keys is there for the stories its templates hide, which
        # the sketch counts in: it goes to the shingle hashes whatever the estimate.
        if similarity < need - rules.verify_margin and channel != BY_RARE_KEYS:
            return False
        # A candidate found by bands alone lies far in SimHash: the sketch is not enough; nor
        # is it for an article that is mostly boilerplate, which the estimate counts in.
        if similarity >= need + rules.verify_margin and not by_bands and boilerplate.trusts_sketch:
            return True
    candidate_shingles = batch.shingles(match.article_id) or b""
    measured = bottom_jaccard(item.shingles, candidate_shingles)
    if measured is not None:
        if measured >= need:
            return not boilerplate.stories_differ(candidate_shingles, need)
        # Too little in common: unless a template on one side hides that they are one story.
        return boilerplate.stories_match(candidate_shingles, need)
    # Nothing on disk to compare (the two shingled differently, or the record is from before
    # the hashes were kept): a SimHash candidate is judged by its sketch estimate, as before
    # them, which compares a mixed-script text by characters; one found by bands alone, far
    # from the article, is not taken on the sketch's word.
    if similarity is None or by_bands:
        return match.distance <= rules.unverifiable_distance
    return similarity >= need


def _counts_as_story(
    rules: MatchRules, batch: Batch, sketch: bytes, boilerplate: ArticleBoilerplate, match: Match
) -> bool:
    """Whether a copy of `match` counts its sample in the window's boilerplate as an original
    does: it and its match each tell a story of their own (`tells_its_own_story`)."""
    if match.exact or rules.boilerplate_min_articles <= 0:
        return False
    # Each side a fifth of its own leaves at most two-thirds Jaccard: a pair estimated well
    # above needs no read.
    similarity = estimate(sketch, match.sketch)
    if similarity is not None and similarity >= OWN_STORY_MAX_JACCARD + rules.verify_margin:
        return False
    return boilerplate.tells_its_own_story(batch.shingles(match.article_id) or b"")


def _may_be_copies(rules: MatchRules, sketch: bytes, match: Match) -> bool:
    """False only for a pair that `_accepts` rejects whichever of the two is decided: its
    sketches' estimate lies below the least Jaccard any rule asks, by more than the margin.
    Cheap, so an article that arrives after unrelated neighbours published later (disorder
    in a topical feed) does not decide each of them again."""
    if match.exact or rules.min_jaccard <= 0 or same_letters(sketch, match.sketch):
        return True
    similarity = estimate(sketch, match.sketch)
    return similarity is None or similarity >= rules.min_jaccard - rules.verify_margin


def _searches_bands(rules: MatchRules) -> bool:
    return rules.band_candidates > 0 and rules.min_jaccard > 0


def _searches_rare_keys(rules: MatchRules) -> bool:
    """Whether the rare-keys channel is asked: not when only SimHash finds candidates
    (`band_candidates` = 0 or plain SimHash), nor without the window's counts."""
    return _searches_bands(rules) and rules.boilerplate_min_articles > 0


def prefetch(batch: Batch, items: Sequence[Analyzed], rules: MatchRules = DEFAULT_RULES) -> None:
    """Read at once what `decide` will read of the committed index for these articles, each
    kind of read vectorized over them: the candidates of every fingerprint and of every set
    of band keys, and the records of every id (re-deliveries and updates)."""
    batch.prefetch([(a.simhash, a.content_hash, a.event_time_ms) for a in items])
    if _searches_bands(rules):
        batch.prefetch_bands([a.bands for a in items], rules.band_min_shared)
    if _searches_rare_keys(rules):
        batch.prefetch_posted(
            [STORY_STARTERS.posted(a.shingles) for a in items],
            rules.boilerplate_min_articles,
            MIN_SHARED_RARE_KEYS,
        )
    batch.prefetch_records([a.id for a in items])


def decide(
    batch: Batch,
    item: Analyzed,
    source: Source,
    now_ms: int,
    rules: MatchRules = DEFAULT_RULES,
) -> tuple[Decision, list[Decision]]:
    """The article's decision, and the corrections it makes to articles published after it
    that were decided before it arrived (consumer/deciding/corrections.py)."""
    prior = batch.lookup(item.id)
    if prior is not None and prior.content_hash == item.content_hash:
        kept = stored.decode(prior.article_id, prior.payload)
        first = now_ms if kept.processed_at_ms is None else kept.processed_at_ms
        again = corrections.message(prior, kept, source, first)
        return again, corrections.again(batch, kept.corrected, source)
    result = _search(batch, rules, item, item.shingles, wide=False)
    if _crowded(result, item.event_time_ms, rules):
        # Articles published after it, indexed before it arrived, took places among its
        # candidates: it is decided against as many earlier ones as in event-time order.
        result = _search(batch, rules, item, item.shingles, wide=True)
    boilerplate = ArticleBoilerplate(batch, item.shingles, rules.boilerplate_min_articles)
    # An article is only ever a copy of one published no later than itself; the articles
    # near it decided before it that it turns out to precede are collected: their decisions
    # may have to change (consumer/deciding/corrections.py).
    best = None
    later: dict[str, tuple[Match, int]] = {}
    for match, channel in _walk_order(result, item.event_time_ms, rules, later=True):
        if match.event_time_ms > item.event_time_ms:
            if channel == BY_RARE_KEYS or _may_be_copies(rules, item.sketch, match):
                later[match.article_id] = (match, channel)
        elif best is None and _accepts(rules, batch, item, match, boilerplate, channel):
            best = match
    counted = False
    if best is not None:
        kind = DecisionKind.DUPLICATE if best.exact else DecisionKind.NEAR_DUPLICATE
        cluster_id = stored.cluster_of(best.article_id, best.payload)
        matched_id, distance = best.article_id, best.distance
        counted = _counts_as_story(rules, batch, item.sketch, boilerplate, best)
    else:
        kind, cluster_id, matched_id, distance = DecisionKind.UNIQUE, item.id, None, None
    decision = StoredDecision(
        kind,
        cluster_id,
        matched_id,
        distance,
        result.late,
        now_ms,
        text_chars=item.text_chars,
        counted=counted,
    )
    record = ArticleRecord(
        article_id=item.id,
        simhash=item.simhash,
        content_hash=item.content_hash,
        event_time_ms=result.event_time_ms,
        payload=stored.encode(item.id, decision),
        sketch=item.sketch,
        bands=item.bands,
        shingles=item.shingles,
    )
    batch.put(record)
    if later:

        def verified_by_item(article_id: str) -> bool:
            match, channel = later[article_id]
            return _accepts(rules, batch, item, match, boilerplate, channel)

        # In the index first: the later articles' candidates are ranked with it among them.
        corrected = corrections.settle(
            batch,
            item,
            cluster_id,
            list(later),
            partial(_takes_earlier, batch, rules, item, verified_by_item),
            partial(_copies_near, batch, rules),
            source,
            now_ms,
        )
        if corrected:
            # Named in the record, so a re-delivery (its first outputs lost) publishes them
            # again.
            decision = dataclasses.replace(decision, corrected=tuple(c.id for c in corrected))
            record = dataclasses.replace(record, payload=stored.encode(item.id, decision))
            batch.put(record)
    else:
        corrected = []
    return corrections.message(record, decision, source, now_ms), corrected


def _search(
    batch: Batch,
    rules: MatchRules,
    article: Analyzed | ArticleRecord,
    shingles: bytes,
    wide: bool,
) -> SearchResult:
    """The article's candidates, best first: as many of each channel as `decide` looks at, or
    with `wide` up to `NEIGHBOURHOOD` (articles published after it may take places); its
    `shingles` give the keys it asks the rare-keys channel for."""
    rare_keys = _searches_rare_keys(rules)
    article_id = article.id if isinstance(article, Analyzed) else article.article_id
    return batch.search(
        article.simhash,
        article.content_hash,
        article.event_time_ms,
        exclude_id=article_id,
        limit=NEIGHBOURHOOD if wide else MAX_CANDIDATES,
        bands=article.bands if _searches_bands(rules) else b"",
        min_shared_bands=rules.band_min_shared,
        band_limit=NEIGHBOURHOOD if wide else rules.band_candidates,
        posted=STORY_STARTERS.posted(shingles) if rare_keys else b"",
        min_shared_posted=MIN_SHARED_RARE_KEYS,
        posted_limit=NEIGHBOURHOOD if wide else RARE_KEY_CANDIDATES,
        posted_rarer_than=rules.boilerplate_min_articles,
    )


def _crowded(result: SearchResult, event_time_ms: int, rules: MatchRules) -> bool:
    """Whether a channel came back full with articles published after `event_time_ms` among
    them: earlier ones past them may have been left out."""
    return any(
        len(found) >= limit and any(m.event_time_ms > event_time_ms for m in found)
        for found, limit in (
            (result.matches, MAX_CANDIDATES),
            (result.band_matches, rules.band_candidates),
            (result.posted_matches, RARE_KEY_CANDIDATES),
        )
    )


def _walk_order(
    result: SearchResult, event_time_ms: int, rules: MatchRules, later: bool
) -> list[tuple[Match, int]]:
    """The candidates `decide` verifies, best first, each with the channel that found it
    (`BY_SIMHASH`...): of those published no later than `event_time_ms`, as many of each
    channel as it looks at (those published after it take no places), and, with `later`, all
    of those."""
    walk = []
    for found, limit, channel in (
        (result.matches, MAX_CANDIDATES, BY_SIMHASH),
        (result.band_matches, rules.band_candidates, BY_BANDS),
        (result.posted_matches, RARE_KEY_CANDIDATES, BY_RARE_KEYS),
    ):
        earlier = 0
        for match in found:
            if match.event_time_ms > event_time_ms:
                if later:
                    walk.append((match, channel))
            elif earlier < limit:
                earlier += 1
                walk.append((match, channel))
    return walk


def _takes_earlier(
    batch: Batch,
    rules: MatchRules,
    earlier: Analyzed,
    verified_by_earlier: Callable[[str], bool],
    record: ArticleRecord,
    was: StoredDecision,
) -> tuple[Match, bool] | None:
    """The stored article's candidate `earlier`, and whether the copy counts its sample
    (`_counts_as_story`), if, decided again now in event-time order, it would take it as its
    match: `earlier` comes before its current match among its candidates
    (only those published no later than it count) and passes verification, the stored article
    being the one decided, as `check` decides it (the length rules are not symmetric)."""
    shingles = batch.shingles(record.article_id) or b""
    boilerplate = ArticleBoilerplate(batch, shingles, rules.boilerplate_min_articles)
    result = _search(batch, rules, record, shingles, wide=True)
    for match, channel in _walk_order(result, record.event_time_ms, rules, later=False):
        if match.article_id == was.matched_id:
            return None
        if match.article_id != earlier.id:
            continue
        if was.text_chars is None:
            # Stored before text lengths were kept: judged from the earlier article's side.
            verified = verified_by_earlier(record.article_id)
        else:
            again = Analyzed(
                record.article_id,
                record.event_time_ms,
                record.simhash,
                record.content_hash,
                record.sketch,
                bands=record.bands,
                shingles=shingles,
                text_chars=was.text_chars,
            )
            verified = _accepts(rules, batch, again, match, boilerplate, channel)
        if not verified:
            return None
        return match, _counts_as_story(rules, batch, record.sketch, boilerplate, match)
    return None


def _copies_near(batch: Batch, rules: MatchRules, record: ArticleRecord) -> list[Match]:
    """The articles that can have taken a stored one as their match: a match is found by
    SimHash distance, by shared band keys or by shared rare keys, all symmetric (the last as
    far as the window's counts are the same now), so they are near it."""
    shingles = (batch.shingles(record.article_id) or b"") if _searches_rare_keys(rules) else b""
    result = _search(batch, rules, record, shingles, wide=True)
    return [*result.matches, *result.band_matches, *result.posted_matches]
