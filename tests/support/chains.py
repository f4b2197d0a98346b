"""Stories reposted in chains — an original, its copies, copies of those copies, verbatim or
edited — for tests of what arrives out of event-time order; and what `check` answers on them.

A copy is published after the article it copies, so sorted by time every chain reads as a
newsroom would have written it; tests then deliver the articles in other orders.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from consumer.cli import main as newsdedup
from consumer.timetext import format_time_ms, parse_event_time_ms

T0 = 1_700_000_000_000
MINUTE_MS = 60_000
# Wide enough that no article of a test is ever late, however it is delivered.
INDEX_TOML = '[index]\nretention = "36500d"\nsegment = "30d"\n'
# The fields of a decision that a reader acts on: `check`'s answer must be these.
COMPARED = ("decision", "cluster_id", "matched_id", "distance", "late")


@dataclass(frozen=True, slots=True)
class Copy:
    """One article of a chain after its original: it copies `parent` (an index into the
    chain, the original being 0), verbatim or edited, `delay_min` minutes after it."""

    parent: int
    edited: bool
    delay_min: int


def _words(rng: random.Random, n: int) -> list[str]:
    # Made-up words of one chain only: two chains never share a shingle by chance.
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def _edited(words: list[str], rng: random.Random) -> list[str]:
    """A careless copy-edit: a few words replaced, sometimes a closing sentence added or the
    end cut off."""
    out = list(words)
    if rng.random() < 0.3:
        out = out[: max(8, len(out) * rng.randint(70, 95) // 100)]
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] = _words(rng, 1)[0]
    if rng.random() < 0.5:
        out += _words(rng, rng.randint(4, 8))
    return out


def chain_articles(chain: int, copies: Sequence[Copy], seed: int) -> list[dict]:
    """The chain's articles as feed messages, the original first. Every article has a time of
    its own (distinct seconds), so the order `check` decides them in is the time order."""
    rng = random.Random(seed * 1000 + chain)
    # From a sentence or two (judged more strictly when short, consumer/deciding/rules.py)
    # to a full article.
    texts = [_words(rng, rng.choice([rng.randint(15, 40), rng.randint(70, 110)]))]
    times = [T0 + chain * 7 * MINUTE_MS + chain * 1000]
    for n, copy in enumerate(copies, 1):
        parent = min(copy.parent, n - 1)
        words = texts[parent]
        texts.append(_edited(words, rng) if copy.edited else list(words))
        # The chain's own second and a distinct millisecond keep every time unique.
        times.append(times[parent] + copy.delay_min * MINUTE_MS + n * 10 + chain)
    return [
        {
            "id": f"c{chain}-{n}",
            "title": f"story {chain}",
            "content": " ".join(words),
            "published_at": format_time_ms(t),
        }
        for n, (words, t) in enumerate(zip(texts, times, strict=True))
    ]


def template_pages(pages: int, seed: int) -> list[dict]:
    """Unrelated stories of one site, each of 100-140 words under the site's footer of 300: two
    pages share more than half of their word 3-grams until the footer is known for a template,
    so the first pages are copies of each other. Times as `chain_articles` gives them."""
    rng = random.Random(seed)
    footer = _words(random.Random(-1 - seed), 300)
    return [
        {
            "id": f"p{n}",
            "title": "",
            "content": " ".join([*_words(rng, rng.randint(100, 140)), *footer]),
            "published_at": format_time_ms(T0 + n * 7 * MINUTE_MS + n * 1000),
        }
        for n in range(pages)
    ]


def published_ms(article: dict) -> int:
    return parse_event_time_ms(article["published_at"])


def by_event_time(articles: Iterable[dict]) -> list[dict]:
    return sorted(articles, key=published_ms)


def check_answer(articles: Iterable[dict]) -> dict[str, dict]:
    """`newsdedup check` on the articles sorted by event time: each id's decision."""
    with tempfile.TemporaryDirectory(prefix="chains-check-") as tmp:
        feed, out, config = Path(tmp, "feed.jsonl"), Path(tmp, "out.jsonl"), Path(tmp, "c.toml")
        feed.write_text("".join(json.dumps(a) + "\n" for a in by_event_time(articles)))
        config.write_text(INDEX_TOML)
        assert newsdedup(["check", str(feed), "-o", str(out), "--config", str(config)]) == 0
        lines = [json.loads(line) for line in out.read_text().splitlines()]
    # A sorted feed needs no correction: each line is the article's only decision.
    assert not any(d.get("correction") for d in lines)
    return {d["id"]: d for d in lines}


def latest_per_key(records: Iterable[dict]) -> dict[str, dict]:
    """What a reader that keeps the latest record per article id ends with."""
    latest: dict[str, dict] = {}
    for record in records:
        latest[record["id"]] = record
    return latest


def differences(got: dict[str, dict], want: dict[str, dict]) -> list[str]:
    """Each article whose latest record does not say what `check` says, and how."""
    wrong = []
    for article_id in sorted(want.keys() | got.keys()):
        if article_id not in got or article_id not in want:
            wrong.append(f"{article_id}: only in {'check' if article_id in want else 'ours'}")
            continue
        ours = {k: got[article_id].get(k) for k in COMPARED}
        theirs = {k: want[article_id].get(k) for k in COMPARED}
        if ours != theirs:
            wrong.append(f"{article_id}: {ours} != check's {theirs}")
    return wrong


def random_chains(rng: random.Random, chains: int, seed: int) -> list[dict]:
    """`chains` chains of one to five copies each, every copy of the original or of a copy
    before it, verbatim or edited, 1 to 120 minutes after it."""
    articles = []
    for n in range(chains):
        copies = [
            Copy(rng.randrange(c + 1), rng.random() < 0.5, rng.randint(1, 120))
            for c in range(rng.randint(1, 5))
        ]
        articles += chain_articles(n, copies, seed)
    return articles
