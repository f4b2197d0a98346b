"""The roles' derived settings and the [scaleout] options: groups, topics and transactional ids
of their own, a decide poll interval long enough for a restore, and bad options refused."""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka.admin import AdminClient

from consumer.config import load_config
from consumer.errors import ConfigError
from consumer.scaleout.common import ensure_scaleout_topics, role_config
from consumer.scaleout.wire import domain_partition


def test_each_role_has_its_own_group_topics_and_transactional_id():
    config = load_config(environ={"NEWSDEDUP_SCALEOUT_INSTANCE_ID": "host-a"})
    fp, dec = role_config(config, "fingerprint").kafka, role_config(config, "decide").kafka
    assert (fp.group_id, dec.group_id) == ("newsdedup-fingerprint", "newsdedup-decide")
    assert (fp.input_topic, fp.output_topic) == ("news.raw", "news.fingerprints")
    assert (dec.input_topic, dec.output_topic) == ("news.fingerprints", "news.decisions")
    assert fp.transactional_id == "newsdedup-fingerprint-host-a"
    assert dec.transactional_id == "newsdedup-decide-host-a"
    other = role_config(load_config(environ={"NEWSDEDUP_SCALEOUT_INSTANCE_ID": "host-b"}), "decide")
    assert other.kafka.transactional_id != dec.transactional_id


def test_decide_allows_long_restores_unless_the_user_says_otherwise():
    assert role_config(load_config(environ={}), "decide").kafka.client == {
        "max.poll.interval.ms": "86400000"
    }
    env = {"NEWSDEDUP_KAFKA_CLIENT_MAX_POLL_INTERVAL_MS": "600000"}
    assert role_config(load_config(environ=env), "decide").kafka.client == {
        "max.poll.interval.ms": "600000"
    }
    assert role_config(load_config(environ={}), "fingerprint").kafka.client == {}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NEWSDEDUP_SCALEOUT_PARTITIONS": "0"}, "[scaleout] partitions"),
        ({"NEWSDEDUP_SCALEOUT_INTERNAL_TOPIC": "news.raw"}, "internal_topic and changelog_topic"),
        ({"NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": "news.fingerprints"}, "must differ"),
        ({"NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": " "}, "changelog_topic must not be empty"),
    ],
)
def test_bad_scaleout_options_are_refused_by_name(env, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(environ=env)


def test_a_domain_always_maps_to_the_same_partition():
    # CRC-32, not the per-process salted hash(): every instance and version must agree, or a
    # domain would move to a partition whose changelog lacks its history.
    assert [domain_partition(d, 6) for d in ("", "zh", "en", "tenant-7")] == [0, 5, 0, 4]


def test_instances_starting_together_all_learn_the_partition_count(kafka_bootstrap):
    # Found by CI: three instances created the topics at once; a loser of the race read the
    # metadata before the topics had partitions, took 0 and divided by it on the first batch.
    for attempt in range(5):
        tag = f"{uuid.uuid4().hex[:8]}"
        config = load_config(
            environ={
                "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
                "NEWSDEDUP_SCALEOUT_INTERNAL_TOPIC": f"race-internal-{tag}",
                "NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": f"race-changelog-{tag}",
                "NEWSDEDUP_SCALEOUT_PARTITIONS": "6",
            }
        )
        start = threading.Barrier(4)
        with ThreadPoolExecutor(4) as pool:
            counts = list(pool.map(_instance_start, [(kafka_bootstrap, config, start)] * 4))
        assert counts == [6, 6, 6, 6], f"attempt {attempt}"


def _instance_start(args: tuple) -> int:
    bootstrap, config, start = args
    admin = AdminClient({"bootstrap.servers": bootstrap})
    start.wait()
    return ensure_scaleout_topics(admin, config)
