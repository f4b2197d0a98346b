"""`newsdedup produce`: load a JSONL corpus into a Kafka topic (demo, tests, benchmarks)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.config import load_config
from consumer.corpus import open_bytes
from consumer.errors import NewsdedupError
from consumer.ops.logs import setup_logging
from consumer.ops.progress import Progress
from consumer.stream.clients import (
    RefusalWatch,
    check_client_settings,
    common_config,
    topic_partitions,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "produce",
        help="load a JSONL corpus into a Kafka topic",
        description="Produce each line of IN.jsonl[.gz] as one message, keyed by its id field.",
    )
    p.add_argument(
        "input", metavar="IN.jsonl", help="articles, one JSON object per line ('-' = stdin)"
    )
    p.add_argument("--topic", required=True, help="destination topic")
    p.add_argument("--config", metavar="FILE", help="configuration file for [kafka] settings")
    p.add_argument("--bootstrap-servers", help="overrides [kafka] bootstrap_servers")
    p.add_argument("--create", action="store_true", help="create the topic when it is missing")
    p.add_argument("--partitions", type=int, default=1, help="partitions when creating (default 1)")
    p.add_argument(
        "--rate", type=float, default=0.0, help="messages per second (default: as fast as possible)"
    )
    p.add_argument("--limit", type=int, help="stop after this many messages (default: all)")
    p.set_defaults(handler=run_produce)


def run_produce(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    # librdkafka's warnings come through logging (kafka_clients.LibrdkafkaLog).
    setup_logging(config.log.level, config.log.format)
    kafka = config.kafka
    check_client_settings(kafka)
    settings = common_config(kafka)
    if args.bootstrap_servers:
        settings["bootstrap.servers"] = args.bootstrap_servers
    _ensure_topic(settings, args)
    producer = Producer(
        {**settings, "linger.ms": 20, "compression.type": "lz4", "enable.idempotence": True}
    )
    failures: list[str] = []

    def on_delivery(error, _msg) -> None:
        if error is not None:
            failures.append(error.str())

    id_field = config.input.id_field
    started = time.monotonic()
    sent = 0
    with Progress("produce", unit="messages") as progress, open_bytes(args.input) as f:
        for line in f:
            value = line.rstrip(b"\r\n")
            if not value.strip():
                continue
            _produce(producer, args.topic, _key(value, id_field), value, on_delivery)
            sent += 1
            progress.advance()
            if args.rate > 0:
                ahead = sent / args.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if args.limit is not None and sent >= args.limit:
                break
    remaining = producer.flush(60)
    if failures or remaining:
        raise NewsdedupError(
            f"{len(failures) + remaining} of {sent} messages were not delivered to {args.topic!r}"
            + (f": {failures[0]}" if failures else "")
        )
    elapsed = time.monotonic() - started
    print(
        f"produce: {sent} messages to {args.topic} in {elapsed:.1f}s "
        f"({sent / max(elapsed, 1e-9):,.0f}/s)",
        file=sys.stderr,
    )
    return 0


def _key(value: bytes, id_field: str) -> bytes | None:
    # Keying by article id keeps every version of an article on one partition, in order.
    try:
        article_id = json.loads(value).get(id_field)
    except (ValueError, AttributeError):
        return None
    return article_id.encode("utf-8") if isinstance(article_id, str) else None


def _produce(producer: Producer, topic: str, key: bytes | None, value: bytes, on_delivery) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)


def _ensure_topic(settings: dict, args: argparse.Namespace) -> None:
    watch = RefusalWatch()
    admin = AdminClient({**settings, "error_cb": watch})
    try:
        exists = topic_partitions(admin, args.topic, timeout=15.0, check=watch.check) is not None
    except KafkaException as e:
        raise NewsdedupError(
            f"cannot reach Kafka at {settings['bootstrap.servers']}: {e.args[0].str()}"
        ) from None
    if exists:
        return
    if not args.create:
        raise NewsdedupError(f"topic {args.topic!r} does not exist (add --create to create it)")
    future = admin.create_topics([NewTopic(args.topic, args.partitions, -1)])[args.topic]
    try:
        future.result()
    except KafkaException as e:
        raise NewsdedupError(f"cannot create topic {args.topic!r}: {e.args[0].str()}") from None
