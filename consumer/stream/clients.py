"""Building the Kafka clients from [kafka], and the topics the service owns.

`[kafka.client]` is passed to librdkafka as is, after the service's own settings, so users
can add security and tuning; the settings correctness depends on are applied last.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from consumer.config import KafkaConfig
from consumer.errors import ConfigError, NewsdedupError
from consumer.ops.logs import log_event

log = logging.getLogger(__name__)

# The first slice of a checked wait, doubled up to the last: a refusal comes within a few
# milliseconds of connecting, while a slow but healthy broker needs slices longer than its
# answer (each slice asks again).
_FIRST_CHECK_S = 0.05
_LAST_CHECK_S = 1.6
# librdkafka keys whose values are credentials (sasl.password, ssl.key.password,
# ssl.keystore.password, sasl.oauthbearer.client.secret, ssl.key.pem, sasl.jaas.config ...).
_SECRET_KEY = re.compile(r"password|secret|\.pem$|jaas|token", re.IGNORECASE)
# The broker refused us for good: retrying cannot help, so nothing should wait on these.
REFUSAL_CODES = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError._SSL,
    }
)


class LibrdkafkaLog:
    """librdkafka's own log lines, through the service's logging (confluent-kafka calls `log`
    from poll and consume) instead of raw `%3|…|FAIL|…` lines on stderr: one structured line
    per facility (FAIL, GETPID…) every `every_s` at most, with the count of those held back,
    one level below librdkafka's, as whatever needs acting on also reaches error_cb, which
    the caller reports in its own words. An unreachable broker is otherwise ~15 lines a
    second."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, _format: str, facility: str, client: str, text: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(facility, -self.every_s) < self.every_s:
                self._held[facility] = self._held.get(facility, 0) + 1
                return
            self._last[facility] = now
            held = self._held.pop(facility, 0)
        fields: dict[str, object] = {"facility": facility, "client": client}
        if held:
            fields["held_back"] = held
        fields["message"] = _THREAD_PREFIX.sub("", text)
        log_event(_librdkafka_log, _quieter(level), "librdkafka", **fields)


def _quieter(level: int) -> int:
    if level >= logging.ERROR:
        return logging.WARNING
    return logging.INFO if level >= logging.WARNING else logging.DEBUG


_librdkafka_log = logging.getLogger("newsdedup.librdkafka")
_THREAD_PREFIX = re.compile(r"^\[thrd:[^\]]*\]: ")
# One for every client of the process: the limit is per facility, whichever client logs.
LIBRDKAFKA_LOG = LibrdkafkaLog()


class TopicError(NewsdedupError):
    """A topic the service needs is missing or cannot be created."""


class KafkaRefused(NewsdedupError):
    """The broker refused our credentials, certificate or authorization."""


class RefusalWatch:
    """An error_cb that remembers the first refusal; `check` raises it (see topic_partitions)."""

    def __init__(self) -> None:
        self.refusal: str | None = None

    def __call__(self, error: KafkaError) -> None:
        if self.refusal is None and (error.fatal() or error.code() in REFUSAL_CODES):
            self.refusal = error.str()

    def check(self) -> None:
        if self.refusal is not None:
            raise KafkaRefused(f"Kafka refused the connection: {self.refusal}")


def redact(text: str, settings: Mapping[str, str]) -> str:
    """`text` with the value of every credential in `settings` masked."""
    for key, value in settings.items():
        if value and _SECRET_KEY.search(key):
            text = text.replace(value, "***")
    return text


def check_client_settings(config: KafkaConfig) -> None:
    """Let librdkafka validate [kafka.client] before any client connects: a misspelt key, a bad
    value or an unreadable certificate becomes one line naming it, with credentials masked.
    Without bootstrap servers the probe client connects to nothing; its log is silenced, or
    it would warn about that, and about every consumer-only key, at each start."""
    try:
        Producer({**config.client, "log_level": 0})
    except KafkaException as e:
        raise ConfigError(
            f"option [kafka.client]: {redact(e.args[0].str(), config.client)}"
        ) from None


def common_config(config: KafkaConfig) -> dict[str, object]:
    return {
        "bootstrap.servers": config.bootstrap_servers,
        "client.id": f"newsdedup-{socket.gethostname()}",
        "logger": LIBRDKAFKA_LOG,
        **config.client,
    }


# How often the clients ask the broker for the topics' metadata: partitions added to the
# input topic are assigned and read about this long after (librdkafka's own default is
# 5 minutes). One small request per interval. [kafka.client] may set another.
METADATA_REFRESH_MS = 10_000


def consumer_config(config: KafkaConfig) -> dict:
    return {
        "statistics.interval.ms": 5000,
        "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
        **common_config(config),
        "group.id": config.group_id,
        # Also where librdkafka goes when retention deleted the committed offset: the service
        # reports those records itself (input_gaps.py).
        "auto.offset.reset": config.auto_offset_reset,
        # Offsets are committed only by the checkpoint, after decisions are durable.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Upstream transactional producers' aborted records must never be decided.
        "isolation.level": "read_committed",
        # Eager assignment: our batch is always complete before the next poll, so a full
        # revoke costs nothing, and it avoids cooperative-sticky's manual-commit pitfalls.
        "partition.assignment.strategy": "range",
    }


def group_instance_id(instance_id: str, metrics_listen: str) -> str:
    """This instance's static name in its consumer group (`group.instance.id`): [scaleout]
    instance_id, else the host name and the metrics port, which no two instances on one host
    can share. It stays the same over restarts, so a restarted instance takes its own place
    back at once instead of waiting out the dead one's session (45 s by default)."""
    if instance_id:
        return instance_id
    port = metrics_listen.rpartition(":")[2]
    # An ephemeral port is not stable; the process id at least keeps instances apart.
    return f"{socket.gethostname()}-{port if port not in ('', '0') else os.getpid()}"


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


def topic_partitions(
    admin: AdminClient,
    topic: str,
    timeout: float = 10.0,
    check: Callable[[], None] | None = None,
) -> int | None:
    """Partition count of `topic`, or None when it does not exist. Raises KafkaException when
    the broker cannot be reached.

    With `check`, the wait is cut into short slices; between them the admin client's callbacks
    run (list_topics does not serve error_cb) and then `check`, which raises to end the wait.
    A refused login is thus noticed after one or two attempts, not after `timeout` seconds of
    reconnects (librdkafka retries a refused SASL login about every 300 ms, a refused TLS
    handshake about every 50 ms).
    """
    deadline = time.monotonic() + timeout
    slice_s = _FIRST_CHECK_S if check else timeout
    while True:
        left = deadline - time.monotonic()
        try:
            metadata = admin.list_topics(topic=topic, timeout=max(min(left, slice_s), 0.01))
            break
        except KafkaException:
            if check is None or time.monotonic() >= deadline:
                raise
            admin.poll(0)
            check()
            slice_s = min(slice_s * 2, _LAST_CHECK_S)
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


def topic_max_message_bytes(admin: AdminClient, topic: str) -> int | None:
    """The broker's `max.message.bytes` for `topic` (its own or the broker's default), or None
    when it cannot be read (e.g. no DescribeConfigs permission)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource], request_timeout=15.0)[resource].result()
    except KafkaException:
        return None
    entry = configs.get("max.message.bytes")
    if entry is None or entry.value is None:
        return None
    return int(entry.value)


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
