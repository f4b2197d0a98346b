"""An index directory lost between a SIGKILL and a restart is rebuilt from the retained feed
before anything more is decided: no copy of an article decided before the loss passes as an
original after it."""

from __future__ import annotations

import shutil

import pytest
from service_support import ServiceProcess, Topics, produce, read_all

from consumer.corpus import iter_jsonl, shared_data_dir

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _articles(n: int) -> list[dict]:
    articles = []
    for a in iter_jsonl(shared_data_dir() / "zh_cctv_xwlb_2022_2026.jsonl.gz"):
        if len(a.get("content") or "") >= 300:
            articles.append({k: a[k] for k in ("id", "title", "content", "published_at")})
        if len(articles) >= n:
            break
    return articles


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_a_deleted_index_is_rebuilt_before_deciding_more(
    kafka_bootstrap, new_topic, tmp_path, delivery
):
    topics = Topics(new_topic("in"), new_topic("out"), new_topic("dlq"))
    before = _articles(600)
    # Reposts of articles decided before the loss, published after them.
    reposts = [{**a, "id": f"repost-{a['id']}"} for a in before[::6]]
    state = tmp_path / "state"
    # The second instance is another member (another metrics port, so another instance id):
    # it gets the partitions once the killed one's session ends, 45 s by librdkafka's default.
    options = {
        "group_id": f"lost-{delivery}",
        "delivery": delivery,
        "kafka_client_session_timeout_ms": "6000",
    }
    produce(kafka_bootstrap, topics.input, before)
    with ServiceProcess(kafka_bootstrap, topics, state, tmp_path / "a.log", **options) as first:
        read_all(kafka_bootstrap, topics.output, expected=len(before), timeout=120, service=first)
        first.kill()
    shutil.rmtree(state)
    produce(kafka_bootstrap, topics.input, reposts)
    with ServiceProcess(kafka_bootstrap, topics, state, tmp_path / "b.log", **options) as second:
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(before) + len(reposts),
            timeout=180,
            service=second,
        )
        assert second.stop() == 0
        log = second.log()
    latest = {r.json()["id"]: r.json() for r in records}
    missed = [a["id"] for a in reposts if latest[a["id"]]["decision"] == "unique"]
    assert not missed, f"{len(missed)} of {len(reposts)} reposts decided unique"
    assert all(latest[a["id"]]["matched_id"] == a["id"][len("repost-") :] for a in reposts)
    assert "rebuilt it from the retained feed" in log
