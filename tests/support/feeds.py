"""Real articles for the service tests, read from the corpora beside the checkout, and the
decisions read back grouped by article."""

from __future__ import annotations

from consumer.corpus import iter_jsonl, shared_data_dir


def real_articles(name: str, n: int) -> list[dict]:
    articles = []
    for a in iter_jsonl(shared_data_dir() / name):
        if len(a.get("content") or "") >= 300:
            articles.append({k: a[k] for k in ("id", "title", "content", "published_at")})
        if len(articles) >= n:
            break
    return articles


def corpus_feed(n: int) -> list[dict]:
    """Real articles: most of the CCTV corpus (short, many look-alikes), topped up with Reuters."""
    feed: list[dict] = []
    for name in ("zh_cctv_xwlb_2022_2026.jsonl.gz", "en_reuters21578.jsonl.gz"):
        for a in iter_jsonl(shared_data_dir() / name):
            if (a.get("title") or "").strip() or (a.get("content") or "").strip():
                feed.append({k: a.get(k) for k in ("id", "title", "content", "published_at")})
            if len(feed) >= n:
                return feed
    return feed


def records_by_id(records) -> dict[str, list[dict]]:
    """Every decision read back, per article id, in the order delivered (keys checked)."""
    out: dict[str, list[dict]] = {}
    for r in records:
        d = r.json()
        assert r.key == d["id"].encode()
        out.setdefault(d["id"], []).append(d)
    return out
