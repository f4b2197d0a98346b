"""The evaluation feed: a corpus in publish order plus edited copies published after their
originals, and the true near-duplicate pairs that recall is counted over.

Deterministic for a seed: the same corpus, limit, number of edits and seed give the same feed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random

from consumer.corpus import iter_jsonl
from consumer.errors import InputError
from consumer.evaluation import truth
from consumer.evaluation.edits import EditKind, Text, applicable_kinds, apply_edit, detect_script
from consumer.ops.progress import Progress

CORPUS_KIND = "corpus"  # recall pairs found in the corpus itself (real republications)

# An edited copy needs enough text that an edit is a small part of it, as in real reposts;
# shorter items are left to the short-text policy, which this feed does not measure.
MIN_SHINGLES_TO_EDIT = 150
# Copies appear between a minute and two days after their original: inside any sensible window.
MAX_COPY_DELAY = timedelta(hours=48)
MIN_COPY_DELAY = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class FeedArticle:
    id: str
    title: str
    content: str
    published_at: datetime  # timezone-aware, UTC
    origin_id: str | None = None  # the corpus article an edited copy was made from
    edit_kind: EditKind | None = None
    edit_detail: str = ""

    @property
    def text(self) -> str:
        return truth.article_text(self.title, self.content)

    def to_message(self) -> dict[str, str]:
        """The input message `newsdedup check` reads, event time in ISO-8601."""
        return {
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "published_at": self.published_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class TruePair:
    """A pair recall counts: `later` should be decided a duplicate of something like `earlier`."""

    earlier: str
    later: str
    kind: str  # CORPUS_KIND or an EditKind value
    jaccard: float


@dataclass(frozen=True, slots=True)
class PageTemplates:
    """What `consumer.evaluation.templates` did to a feed: which articles carry which invented
    site's page template, and each of them as it was before, which truth keeps judging."""

    share: float  # of the corpus articles, templated
    untemplated: dict[str, FeedArticle]  # templated article id → the article without its template
    site: dict[str, str]  # templated article id → the site whose template it carries
    reposts: dict[str, str]  # edited copy id → same_site, other_site or none


@dataclass(frozen=True, slots=True)
class Feed:
    articles: list[FeedArticle]  # in feed (publish) order
    pairs: list[TruePair]
    undated: int  # corpus articles left out because their date could not be read
    silver_pairs_checked: int  # silver candidate pairs whose exact Jaccard was recomputed
    templates: PageTemplates | None = None  # set on a feed with page templates

    def texts(self) -> dict[str, str]:
        """The text of each article as the systems read it (page template included)."""
        return {a.id: a.text for a in self.articles}

    def story_texts(self) -> dict[str, str]:
        """The text each article's story is judged by: without any page template, since two
        pages of one site are not the same story for sharing a template."""
        if self.templates is None:
            return self.texts()
        plain = self.templates.untemplated
        return {a.id: plain.get(a.id, a).text for a in self.articles}

    def templated_ids(self) -> frozenset[str]:
        return frozenset(self.templates.site) if self.templates else frozenset()


_REUTERS_TIME = re.compile(
    r"(\d{1,2})-([A-Z]{3})-(\d{4}) (\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,2}))?", re.IGNORECASE
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1
    )
}


def parse_published_at(value: object) -> datetime | None:
    """ISO-8601 dates or timestamps, epoch milliseconds, or Reuters' `9-APR-1987 00:00:00.00`.

    Naive times are taken as UTC: only the order and gaps matter to the evaluation.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return datetime.fromtimestamp(int(text) / 1000, UTC)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        m = _REUTERS_TIME.search(text)
        if not m or m.group(2).upper() not in _MONTHS:
            return None
        day, month, year, hh, mm, ss, frac = m.groups()
        parsed = datetime(
            int(year), _MONTHS[month.upper()], int(day), int(hh), int(mm), int(ss),
            int((frac or "0").ljust(2, "0")) * 10_000,
        )  # fmt: skip
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def load_corpus(path: str | Path, limit: int | None = None) -> tuple[list[FeedArticle], int]:
    """The first `limit` articles in publish order (ties: file order), and how many were undated."""
    articles: list[FeedArticle] = []
    undated = 0
    with Progress("reading corpus", unit="articles") as progress:
        for record in iter_jsonl(path):
            progress.advance()
            when = parse_published_at(record.get("published_at"))
            article_id = record.get("id")
            if when is None or not isinstance(article_id, str):
                undated += 1
                continue
            articles.append(
                FeedArticle(
                    id=article_id,
                    title=str(record.get("title") or ""),
                    content=str(record.get("content") or ""),
                    published_at=when,
                )
            )
    articles.sort(key=lambda a: a.published_at)  # stable: same-day articles keep file order
    return articles[:limit] if limit is not None else articles, undated


def silver_path(corpus: str | Path) -> Path:
    """`X.jsonl.gz` → `X.near_dup_pairs.jsonl.gz`, the silver pair list beside a corpus."""
    p = Path(corpus)
    name = p.name.removesuffix(".gz").removesuffix(".jsonl")
    return p.with_name(f"{name}.near_dup_pairs.jsonl.gz")


def corpus_pairs(
    articles: list[FeedArticle], candidates: Iterable[dict], texts: dict[str, str]
) -> tuple[list[TruePair], int]:
    """Silver candidates among `articles` whose exact Jaccard (our truth) is ≥ 0.8.

    The silver lists were found by MinHash-LSH at Jaccard ≥ 0.5 and are nearly complete above
    0.8; every candidate is recomputed here, as our normalization (markup, script folding)
    differs slightly from theirs.
    """
    position = {a.id: i for i, a in enumerate(articles)}
    judge = truth.Truth(texts)
    seen: set[tuple[str, str]] = set()
    checked = 0
    pairs = []
    for c in candidates:
        a, b = c.get("a"), c.get("b")
        if a not in position or b not in position or a == b:
            continue
        earlier, later = (a, b) if position[a] < position[b] else (b, a)
        if (earlier, later) in seen:
            continue
        seen.add((earlier, later))
        checked += 1
        j = judge(earlier, later)
        if j >= truth.NEAR_DUP_JACCARD:
            pairs.append(TruePair(earlier, later, CORPUS_KIND, j))
    return pairs, checked


def make_copies(articles: list[FeedArticle], n: int, seed: int) -> Iterator[FeedArticle]:
    """`n` edited copies of random articles, the kinds taken in turn so each is well measured.

    A copy whose Jaccard to its original falls below 0.5 is no longer a near-duplicate by the
    truth's own measure (an edit too large for a short article), so it is drawn again.
    """
    rng = Random(seed)
    for i in range(n):
        for _attempt in range(50):
            original = articles[rng.randrange(len(articles))]
            if len(truth.shingles(original.text)) < MIN_SHINGLES_TO_EDIT:
                continue
            script = detect_script(original.text)
            kinds = applicable_kinds(script)
            kind = kinds[i % len(kinds)]
            donor = articles[rng.randrange(len(articles))]
            if donor.id == original.id:
                continue
            edit = apply_edit(
                kind,
                Text(original.title, original.content),
                script,
                rng,
                Text(donor.title, donor.content),
            )
            copy_text = truth.article_text(edit.text.title, edit.text.content)
            if truth.similarity(original.text, copy_text) < truth.MATCH_JACCARD:
                continue
            delay = MIN_COPY_DELAY + (MAX_COPY_DELAY - MIN_COPY_DELAY) * rng.random()
            yield FeedArticle(
                id=f"{original.id}~edit{i}-{kind}",
                title=edit.text.title,
                content=edit.text.content,
                published_at=original.published_at + delay,
                origin_id=original.id,
                edit_kind=kind,
                edit_detail=edit.detail,
            )
            break
        else:
            raise InputError(
                f"could not make edited copy {i}: the corpus has too few articles with "
                f"{MIN_SHINGLES_TO_EDIT}+ shingles; use --edits 0 or a larger --limit"
            )


def build_feed(
    corpus: str | Path, limit: int | None = None, edits: int = 1000, seed: int = 0
) -> Feed:
    """Corpus articles in publish order plus `edits` copies, and the recall pairs of both."""
    articles, undated = load_corpus(corpus, limit)
    if not articles:
        raise InputError(f"{corpus}: no dated articles to evaluate")
    copies = list(make_copies(articles, edits, seed)) if edits else []
    # Originals come before any copy published at the same instant (a copy is never earlier).
    order = {id(a): i for i, a in enumerate(articles + copies)}
    feed = sorted(articles + copies, key=lambda a: (a.published_at, order[id(a)]))
    texts = {a.id: a.text for a in feed}
    if len(texts) != len(feed):
        raise InputError(f"{corpus}: article ids are not unique")
    silver = silver_path(corpus)
    candidates = iter_jsonl(silver) if silver.exists() else iter(())
    pairs, checked = corpus_pairs(articles, candidates, texts)
    pairs += [
        TruePair(
            c.origin_id or "",
            c.id,
            str(c.edit_kind),
            truth.similarity(texts[c.origin_id or ""], texts[c.id]),
        )
        for c in copies
    ]
    return Feed(feed, pairs, undated, checked)
