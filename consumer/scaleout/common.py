"""What the two split roles share: their derived Kafka settings and their topics.

A role is the service's loop with another stage (stream/stage.py): the fingerprint role
reads the feed and writes the internal topic, the decide role reads the internal topic and
writes decisions. Each has a consumer group of its own, so the group spreads the feed's
partitions over fingerprint instances and the internal partitions over decide instances.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.config import Config
from consumer.ops.logs import log_event
from consumer.stream.clients import (
    TopicError,
    topic_partitions,
)

log = logging.getLogger("newsdedup.roles")

# The changelog keeps whole days beyond the window: a restore must find every record that can
# still be searched, and deletion by time is per log segment, so it lags retention.ms anyway.
_CHANGELOG_EXTRA_RETENTION_MS = 86_400_000
_DECIDE_MAX_POLL_INTERVAL_MS = "86400000"  # librdkafka's largest value: 24 h


def role_config(config: Config, role: str) -> Config:
    """The [kafka] settings a role's own Service sees: its group, its input or output topic and
    a transactional.id of its own (two instances sharing one would fence each other)."""
    kafka, so = config.kafka, config.scaleout
    instance = so.instance_id or socket.gethostname()
    base = kafka.transactional_id or kafka.group_id
    changes: dict[str, object] = {
        "group_id": f"{kafka.group_id}-{role}",
        "transactional_id": f"{base}-{role}-{instance}",
    }
    client = dict(kafka.client)
    if role == "fingerprint":
        changes["output_topic"] = so.internal_topic
    else:
        changes["input_topic"] = so.internal_topic
        # A restore runs inside the assignment callback, where librdkafka counts the time
        # since the last poll: a long one would otherwise be taken for a hung member and
        # trigger a rebalance, which restarts the restore. Hangs are caught by /healthz.
        client.setdefault("max.poll.interval.ms", _DECIDE_MAX_POLL_INTERVAL_MS)
    return dataclasses.replace(config, kafka=dataclasses.replace(kafka, client=client, **changes))


def ensure_scaleout_topics(admin: AdminClient, config: Config) -> int:
    """Create the internal and changelog topics when missing; returns their partition count,
    which must be the same for both (a domain's changelog partition is its internal one)."""
    so, kafka = config.scaleout, config.kafka
    retention = config.index.retention.ms + _CHANGELOG_EXTRA_RETENTION_MS
    wanted = {
        so.internal_topic: {},
        so.changelog_topic: {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(retention),
        },
    }
    missing = [t for t in wanted if topic_partitions(admin, t) is None]
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(t, so.partitions, kafka.create_replication_factor, config=wanted[t])
                for t in missing
            ],
            request_timeout=15.0,
        )
        for topic, future in futures.items():
            try:
                future.result()
                log_event(log, logging.INFO, "topic created", topic=topic, partitions=so.partitions)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TopicError(f"cannot create topic {topic!r}: {e.args[0].str()}") from None
    counts = {t: _settled_partitions(admin, t) for t in wanted}
    if len(set(counts.values())) != 1:
        raise TopicError(
            f"the internal and changelog topics must have the same partitions, found {counts}: "
            "a domain's changelog partition is its internal partition"
        )
    return counts[so.internal_topic]


def _settled_partitions(admin: AdminClient, topic: str, timeout: float = 30.0) -> int:
    """The partition count of a topic that exists. Just after a creation (this instance's or
    another's racing it) the broker may answer "unknown" or "no partitions" for a while; a
    count of 0 taken then would send every record to partition `crc % 0`."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            count = topic_partitions(admin, topic)
        except KafkaException as e:
            # LEADER_NOT_AVAILABLE and the like: the partitions are still being placed.
            if time.monotonic() >= deadline:
                raise TopicError(f"topic {topic!r} has no usable metadata: {e}") from None
            count = None
        if count:
            return count
        if time.monotonic() >= deadline:
            raise TopicError(f"topic {topic!r} reports no partitions after {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
