"""Building the Kafka clients from [kafka], and the topics the service owns.

`[kafka.client]` is passed to librdkafka as is, after the service's own settings, so users
can add security and tuning; the settings correctness depends on are applied last.
"""

from __future__ import annotations

import logging
import socket

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.config import KafkaConfig
from consumer.errors import NewsdedupError
from consumer.logs import log_event

log = logging.getLogger(__name__)


class TopicError(NewsdedupError):
    """A topic the service needs is missing or cannot be created."""


def common_config(config: KafkaConfig) -> dict[str, str]:
    return {
        "bootstrap.servers": config.bootstrap_servers,
        "client.id": f"newsdedup-{socket.gethostname()}",
        **config.client,
    }


def consumer_config(config: KafkaConfig) -> dict:
    return {
        "auto.offset.reset": "earliest",
        "statistics.interval.ms": 5000,
        **common_config(config),
        "group.id": config.group_id,
        # Offsets are committed only by the checkpoint, after decisions are durable.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Upstream transactional producers' aborted records must never be decided.
        "isolation.level": "read_committed",
        # Eager assignment: our batch is always complete before the next poll, so a full
        # revoke costs nothing, and it avoids cooperative-sticky's manual-commit pitfalls.
        "partition.assignment.strategy": "range",
    }


def producer_config(config: KafkaConfig) -> dict:
    settings = {
        "linger.ms": 5,
        "compression.type": "lz4",
        **common_config(config),
        "enable.idempotence": True,
        "acks": "all",
    }
    if config.delivery == "exactly_once":
        settings["transactional.id"] = config.transactional_id or f"{config.group_id}-0"
    return settings


def admin_config(config: KafkaConfig) -> dict:
    return common_config(config)


def topic_partitions(admin: AdminClient, topic: str, timeout: float = 10.0) -> int | None:
    """Partition count of `topic`, or None when it does not exist. Raises KafkaException when
    the broker cannot be reached."""
    metadata = admin.list_topics(topic=topic, timeout=timeout)
    info = metadata.topics.get(topic)
    if info is None or (
        info.error is not None
        and info.error.code()
        in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_TOPIC,
        )
    ):
        return None
    if info.error is not None:
        raise KafkaException(info.error)
    return len(info.partitions)


def ensure_output_topics(admin: AdminClient, config: KafkaConfig, input_partitions: int) -> None:
    """Create the output and DLQ topics when missing (never the input topic)."""
    partitions = config.create_partitions or input_partitions
    missing = [
        t for t in (config.output_topic, config.dlq_topic) if topic_partitions(admin, t) is None
    ]
    if not missing:
        return
    futures = admin.create_topics(
        [NewTopic(t, partitions, config.create_replication_factor) for t in missing],
        request_timeout=15.0,
    )
    for topic, future in futures.items():
        try:
            future.result()
            log_event(log, logging.INFO, "topic created", topic=topic, partitions=partitions)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicError(f"cannot create topic {topic!r}: {e.args[0].str()}") from None
