"""A templated evaluation feed: articles as scraped from invented sites' pages.

Real feeds carry page templates (leaked CSS, navigation, share widgets, footers) that make two
unrelated articles of one site share text, and one story on two sites differ by more than its
edits. `apply_templates` gives a share of the corpus articles their site's template and the
edited copies, in equal parts, the template of their original's site (a same-site repost),
of another site (a cross-site repost), or none. Deterministic for a seed.

Truth stays about the story: the pairs keep the Jaccard of the untemplated texts, and the feed
keeps every templated article's untemplated version for judging flags (`Feed.story_texts`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache
from random import Random

from consumer.errors import InputError
from consumer.evaluation.edits import Script, detect_script
from consumer.evaluation.feed import Feed, FeedArticle, PageTemplates
from consumer.evaluation.sites import CHINESE_SITES, ENGLISH_SITES, Site

SAME_SITE = "same_site"
OTHER_SITE = "other_site"
NO_TEMPLATE = "none"
REPOST_KINDS = (SAME_SITE, OTHER_SITE, NO_TEMPLATE)

# A related-articles list links to recent stories: it is drawn from this many headlines
# published before the article.
RECENT_TITLES = 200
# The feed's script is that of most of these many corpus articles, spread over the feed.
SCRIPT_SAMPLE = 50


def apply_templates(feed: Feed, share: float, seed: int) -> Feed:
    """`feed` with `share` (0..1) of its corpus articles, and two thirds of its edited copies,
    in page templates; share 0 returns `feed` itself."""
    if not 0 <= share <= 1:
        raise InputError(f"a share of {share} templated articles is not between 0 and 1")
    if share == 0:
        return feed
    rng = Random(f"page-templates:{seed}")  # a stream of its own: the edits keep theirs
    corpus = [a for a in feed.articles if a.origin_id is None]
    sites = sites_for(feed_script(corpus))
    # Every corpus article comes from a site; only `share` of them show its template.
    home = {a.id: rng.choice(sites) for a in corpus}
    shown = set(rng.sample([a.id for a in corpus], round(share * len(corpus))))
    reposts = _repost_kinds([a for a in feed.articles if a.origin_id is not None], rng)

    def site_of(article: FeedArticle) -> Site | None:
        if article.origin_id is None:
            return home[article.id] if article.id in shown else None
        original = home[article.origin_id]
        kind = reposts[article.id]
        if kind == SAME_SITE:
            return original
        if kind == OTHER_SITE:
            return rng.choice([s for s in sites if s is not original])
        return None

    articles, untemplated, site_key = [], {}, {}
    recent: deque[str] = deque(maxlen=RECENT_TITLES)
    for article in feed.articles:
        site = site_of(article)
        if site is not None:
            page = site.render(rng, article.published_at, recent)
            templated = replace(article, content=page.wrap(article.content))
            articles.append(templated)
            untemplated[article.id] = article
            site_key[article.id] = site.key
        else:
            articles.append(article)
        if article.origin_id is None and article.title.strip():
            recent.append(article.title.strip())
    return replace(
        feed,
        articles=articles,
        templates=PageTemplates(share, untemplated, site_key, reposts),
    )


def _repost_kinds(copies: Sequence[FeedArticle], rng: Random) -> dict[str, str]:
    """Each copy's kind of repost: the three kinds in equal parts (±1), shuffled."""
    kinds = [REPOST_KINDS[i % len(REPOST_KINDS)] for i in range(len(copies))]
    rng.shuffle(kinds)
    return {c.id: k for c, k in zip(copies, kinds, strict=True)}


def feed_script(corpus: Sequence[FeedArticle]) -> Script:
    """The script most of the corpus is written in (sampled: detection converts text)."""
    if not corpus:
        return Script.SIMPLIFIED
    step = max(1, len(corpus) // SCRIPT_SAMPLE)
    votes = [detect_script(a.text) for a in corpus[::step]]
    return max(Script, key=votes.count)


def sites_for(script: Script) -> tuple[Site, ...]:
    """English sites for an English feed, Chinese ones (in the feed's script) otherwise."""
    if script is Script.LATIN:
        return ENGLISH_SITES
    if script is Script.SIMPLIFIED:
        return CHINESE_SITES
    to_traditional = _s2t()
    return tuple(
        replace(
            s,
            head=to_traditional(s.head),
            tail=to_traditional(s.tail),
            editors=tuple(to_traditional(e) for e in s.editors),
        )
        for s in CHINESE_SITES
    )


@lru_cache(maxsize=1)
def _s2t() -> Callable[[str], str]:
    import opencc

    return opencc.OpenCC("s2t").convert
