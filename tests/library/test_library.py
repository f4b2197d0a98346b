"""The library API (`from newsdedup import Deduplicator`): the decisions of `check`, on every
corpus; clear errors; persistence; one writer at a time under threads."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from checking import NEWSDEDUP, run_check
from newsdedup import DecisionKind, Deduplicator, InvalidArticle

from consumer.config import ConfigError
from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.timetext import parse_event_time_ms

CORPORA = ("zh_hkcnews_2017_2022", "zh_cctv_xwlb_2022_2026", "en_reuters21578")
COMPARED = ("decision", "cluster_id", "matched_id", "distance", "late")


def _raw_articles(name: str, n: int) -> list[dict]:
    """The corpus's first `n` articles as they are: its own order, dates and gaps."""
    return list(iter_jsonl(shared_data_dir() / f"{name}.jsonl.gz", n))


def _latest(decisions) -> dict[str, tuple]:
    """What a reader that keeps the latest decision per article ends with."""
    latest = {}
    for d in decisions:
        d = d if isinstance(d, dict) else d.to_dict()
        latest[d["id"]] = tuple(d.get(k) for k in COMPARED)
    return latest


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPORA)
def test_the_same_articles_in_the_same_order_get_check_s_decisions(tmp_path, name):
    articles = _raw_articles(name, 4000)
    expected = _latest(run_check(tmp_path, articles))
    with Deduplicator(tmp_path / "library", workers=None) as dedup:
        result = dedup.decide_many(articles)
    assert [d.id for d in result] == [a["id"] for a in articles]
    got = _latest([*result, *result.corrections])
    assert got.keys() == expected.keys()
    differ = [i for i in got if got[i] != expected[i]]
    assert not differ, f"{len(differ)} differ, e.g. {[(got[i], expected[i]) for i in differ[:3]]}"
    assert sum(v[0] != "unique" for v in got.values()) > 10


def test_calls_one_after_another_equal_check_on_a_feed_in_publish_order(tmp_path):
    # Each call is decided before the next is taken (a file's lines are sorted within the
    # reorder window): in publish order, how the feed is cut into calls changes nothing.
    dated = [a for a in _raw_articles("en_reuters21578", 600) if a.get("published_at")]
    articles = sorted(dated, key=lambda a: parse_event_time_ms(a["published_at"]))
    expected = _latest(run_check(tmp_path, articles))
    decided: list = []
    with Deduplicator(tmp_path / "library", workers=None, on_correction=decided.append) as dedup:
        decided += [dedup.decide(a) for a in articles[:300]]
        for part in (articles[300:301], articles[301:]):
            result = dedup.decide_many(part)
            decided += [*result, *result.corrections]
    assert _latest(decided) == expected


def test_an_invalid_article_raises_naming_its_field_and_nothing_of_the_call_is_decided(
    tmp_path,
):
    good = {"id": "a", "title": "Rates", "content": "The central bank held rates again."}
    with Deduplicator(tmp_path / "ix", workers=None) as dedup:
        with pytest.raises(InvalidArticle) as raised:
            dedup.decide_many([good, {"id": "b", "title": 7, "content": "x"}])
        assert raised.value.field == "title" and raised.value.index == 1
        assert "'title' must be a string" in str(raised.value)
        with pytest.raises(InvalidArticle, match="published_at") as raised:
            dedup.decide({**good, "id": "c", "published_at": "yesterday-ish"})
        assert raised.value.field == "published_at"
        with pytest.raises(InvalidArticle) as raised:
            dedup.decide({"title": "no id"})
        assert raised.value.field == "id"
        # "a" was not decided by the refused call: it starts its own cluster now.
        assert dedup.decide(good).decision is DecisionKind.UNIQUE


def test_options_are_the_service_s_by_name_and_are_checked(tmp_path):
    with pytest.raises(TypeError, match="unknown option 'retension'"):
        Deduplicator(tmp_path / "a", retension="72h")
    with pytest.raises(ConfigError, match="max_distance"):
        Deduplicator(tmp_path / "b", max_distance=40)
    text = {"title": "Storm", "content": "A storm closed the port for two days this week."}
    with Deduplicator(tmp_path / "c", workers=None, retention="1h", segment="1h") as dedup:
        dedup.decide({**text, "id": "old", "published_at": "2024-05-01T08:00:00Z"})
        later = dedup.decide({**text, "id": "new", "published_at": "2024-05-01T12:00:00Z"})
    assert later.decision is DecisionKind.UNIQUE  # "old" left the one-hour window


def test_decisions_persist_and_explain_stores_nothing(tmp_path):
    article = {
        "id": "a",
        "title": "Port reopens",
        "content": "The port reopened on Monday after the storm, officials said.",
        "published_at": "2024-05-01T08:00:00Z",
    }
    copy = {**article, "id": "b", "published_at": "2024-05-01T09:00:00Z"}
    with Deduplicator(tmp_path / "ix", workers=None) as dedup:
        first = dedup.decide(article)
        explained = dedup.explain(copy)
        assert explained.decision.decision is DecisionKind.DUPLICATE
        assert explained.decision.matched_id == "a"
        assert "same normalized text as a" in str(explained)
    with Deduplicator(tmp_path / "ix", workers=None) as dedup:
        assert dedup.decide(article).cluster_id == first.cluster_id  # the stored decision
        decided = dedup.decide(copy)  # the explained copy was not stored: decided now
        assert (decided.decision, decided.matched_id) == (DecisionKind.DUPLICATE, "a")


def test_a_second_deduplicator_on_one_index_is_refused_and_a_closed_one_says_so(tmp_path):
    dedup = Deduplicator(tmp_path / "ix", workers=None)
    with pytest.raises(Exception, match=r"(?i)lock"):
        Deduplicator(tmp_path / "ix", workers=None)
    dedup.close()
    with pytest.raises(Exception, match="closed"):
        dedup.decide({"id": "a", "title": "t", "content": "c"})


def test_threads_share_one_deduplicator_one_call_at_a_time(tmp_path):
    articles = _raw_articles("en_reuters21578", 400)
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    corrections: list = []
    with Deduplicator(tmp_path / "ix", workers=None, on_correction=corrections.append) as dedup:

        def work(t: int) -> None:
            try:
                mine = articles[t::4]
                results[t] = [dedup.decide(a) for a in mine[:40]] + list(
                    dedup.decide_many(mine[40:])
                )
            except BaseException as e:  # reported below, in the test's thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        decided = {d.id: d for ds in results.values() for d in ds}
        assert decided.keys() == {a["id"] for a in articles}
        # Every decision was stored whole: deciding each article again gives back the latest
        # (its correction, if an earlier original came in another thread's call after it).
        latest = {**decided, **{c.id: c for c in corrections}}
        again = dedup.decide_many(articles)
        assert {d.id: d.cluster_id for d in again} == {i: d.cluster_id for i, d in latest.items()}


def test_a_reader_sees_what_returned_calls_decided_while_the_writer_is_open(tmp_path):
    article = {"id": "a", "title": "Port", "content": "The port reopened on Monday, they said."}
    with Deduplicator(tmp_path / "ix", workers=None) as dedup:
        dedup.decide(article)
        read = subprocess.run(
            [*NEWSDEDUP, "index", "get", "a", "--state", str(tmp_path / "ix")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout)["cluster_id"] == "a"
