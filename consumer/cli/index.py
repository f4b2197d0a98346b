"""`newsdedup index stats|get|expire --state DIR`: inspect and expire the index on disk;
`newsdedup index rebuild`: restore the decide role's indexes from the changelog, or
(`--from-feed`) the single-process index from the retained feed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from consumer.config import Config
from consumer.errors import InputError
from consumer.quantities import parse_duration_ms
from consumer.timetext import format_time_ms, parse_event_time_ms
from indexstore import IndexStore


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="inspect the index: segments, counts, articles")
    sub = parser.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    stats = sub.add_parser(
        "stats",
        help="segments with time ranges, article counts, bytes on disk, k and layout",
        description="Opens the index read-only, so it works while the service runs.",
    )
    _state(stats)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=run_stats)

    get = sub.add_parser(
        "get",
        help="print one article's record as JSON",
        description="Opens the index read-only, so it works while the service runs. Binary "
        "fields are hex; processed_at is when the service first decided the article.",
    )
    get.add_argument("article_id", metavar="ID", help="the article's id, as in its decision")
    _state(get)
    get.set_defaults(handler=run_get)

    expire = sub.add_parser(
        "expire",
        help="drop whole segments older than TIME (default: older than the window)",
        description="Needs the index to itself: stop the service first.",
    )
    _state(expire)
    expire.add_argument(
        "--before", metavar="TIME", help="ISO-8601 or epoch ms; segments ending before it go"
    )
    expire.add_argument(
        "--retention",
        default="72h",
        help="window used when --before is absent: drop what ends before watermark - "
        "retention (default 72h)",
    )
    expire.set_defaults(handler=run_expire)

    rebuild = sub.add_parser(
        "rebuild",
        help="restore the decide role's indexes from the changelog topic, or with --from-feed "
        "the single-process index from the retained feed",
        description="What `run --role decide` does before it owns a partition: replay the "
        "changelog partition into <state>/partition-N/, from the position the local indexes "
        "already cover (an empty directory: from the start). Needs the partition's indexes "
        "to itself: run it where no decide instance owns them. With --from-feed, for `run` "
        "(--role all): decide the input topic again, from its earliest retained offsets up to "
        "the group's committed offsets, into an empty directory, publishing nothing; the "
        "service then continues from its committed offsets. Stop the service first.",
    )
    rebuild.add_argument(
        "--from-feed",
        action="store_true",
        help="rebuild the single-process index by replaying the retained input topic",
    )
    rebuild.add_argument("--config", metavar="FILE", help="configuration file (TOML)")
    rebuild.add_argument(
        "--state", metavar="DIR", help="where the indexes go (default: [index] path)"
    )
    rebuild.add_argument(
        "--partition",
        type=int,
        action="append",
        metavar="N",
        help="a changelog partition (repeat for several; default: all)",
    )
    rebuild.set_defaults(handler=run_rebuild)


def _state(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", metavar="DIR", required=True, help="the index directory")


def run_stats(args: argparse.Namespace) -> int:
    with IndexStore.open(args.state, read_only=True) as store:
        stats = store.stats()
    if args.json:
        print(json.dumps(dataclasses.asdict(stats), indent=2))
        return 0
    wm = "none" if stats.watermark_ms is None else format_time_ms(stats.watermark_ms)
    print(f"k={stats.max_distance}  layout: {stats.layout}")
    print(f"segment width {stats.segment_ms} ms, watermark {wm}")
    print(
        f"{stats.articles:,} articles in {len(stats.segments)} segments, "
        f"{stats.disk_bytes:,} bytes on disk"
    )
    if stats.segments:
        print(f"{'segment':>10}  {'start':<20}  {'end':<20}  {'articles':>10}  {'bytes':>12}")
    for s in stats.segments:
        print(
            f"{s.segment_id:>10}  {format_time_ms(s.start_ms):<20}  "
            f"{format_time_ms(s.end_ms):<20}  {s.articles:>10,}  {s.bytes:>12,}"
        )
    return 0


def run_get(args: argparse.Namespace) -> int:
    from consumer.deciding import stored

    with IndexStore.open(args.state, read_only=True) as store:
        record = store.get(args.article_id)
    if record is None:
        raise InputError(f"no article {args.article_id!r} in {args.state}")
    doc: dict[str, object] = {
        "article_id": record.article_id,
        "simhash": f"{record.simhash:016x}",
        "content_hash": record.content_hash.hex(),
        "event_time_ms": record.event_time_ms,
    }
    # The decision is the service's payload; a record written by other code shows it raw.
    decision = stored.decode_or_none(record.article_id, record.payload)
    if decision is not None:
        doc["cluster_id"] = decision.cluster_id
        doc["decision"] = decision.kind.value
        doc["matched_id"] = decision.matched_id
        doc["distance"] = decision.distance
        doc["late"] = decision.late
    doc["payload"] = record.payload.hex()
    doc["sketch"] = record.sketch.hex()
    doc["event_time"] = format_time_ms(record.event_time_ms)
    if decision is not None:
        if decision.processed_at_ms is not None:
            doc["processed_at"] = format_time_ms(decision.processed_at_ms)
        if decision.corrected:
            doc["corrected"] = list(decision.corrected)
    print(json.dumps(doc, ensure_ascii=False, indent=2))
    return 0


def run_expire(args: argparse.Namespace) -> int:
    try:
        before = None if args.before is None else parse_event_time_ms(args.before)
        retention = parse_duration_ms(args.retention)
    except ValueError as e:
        raise InputError(str(e)) from e
    options = IndexStore.stored_options(args.state, retention_ms=retention)
    with IndexStore.open(args.state, options) as store:
        dropped = store.expire(before)
    print(f"dropped {len(dropped)} segments" + (f": {dropped}" if dropped else ""))
    return 0


def run_rebuild(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient

    from consumer.config import load_config
    from consumer.scaleout.changelog import restore_partition
    from consumer.scaleout.domains import DomainStores
    from consumer.stream.clients import admin_config, consumer_config, topic_partitions

    config = load_config(args.config)
    if args.from_feed:
        if args.partition:
            raise InputError("--partition names changelog partitions: not with --from-feed")
        return _rebuild_from_feed(config, Path(args.state or config.index.path))
    topic = config.scaleout.changelog_topic
    count = topic_partitions(AdminClient(admin_config(config.kafka)), topic)
    if count is None:
        raise InputError(f"the changelog topic {topic!r} does not exist")
    partitions = args.partition if args.partition else list(range(count))
    with DomainStores(config.index, args.state) as stores:
        for partition in partitions:

            def progress(p: int, read: int, left: int) -> None:
                print(f"\rpartition {p}: {read:,} read, {left:,} left", end="", file=sys.stderr)

            result = restore_partition(
                consumer_config(config.kafka), topic, partition, stores, progress
            )
            print(file=sys.stderr)
            print(
                f"partition {partition}: {result.read:,} records from offset "
                f"{result.start_offset:,}, {result.applied:,} applied, "
                f"{result.seconds:.1f} s ({result.per_second:,.0f}/s)"
            )
    return 0


def _rebuild_from_feed(config: Config, directory: Path) -> int:
    from confluent_kafka.admin import AdminClient

    from consumer.ops.progress import Progress
    from consumer.roles.replay import replay_feed
    from consumer.stream.clients import admin_config, topic_partitions
    from consumer.stream.state import open_index

    if directory.exists() and any(directory.iterdir()):
        raise InputError(
            f"{directory} is not empty: rebuild into an empty directory (move a damaged index "
            f"aside first: mv {directory} {directory}.damaged)"
        )
    topic = config.kafka.input_topic
    partitions = topic_partitions(AdminClient(admin_config(config.kafka)), topic)
    if partitions is None:
        raise InputError(f"the input topic {topic!r} does not exist")

    with (
        open_index(config.index, str(directory)) as store,
        Progress("rebuild", unit="messages") as bar,
    ):
        result = replay_feed(config, store, partitions, lambda done: bar.advance(done - bar.count))
        articles = store.stats().articles
    for p in result.partitions:
        print(f"partition {p.partition}: offsets {p.start:,} to {p.end:,} replayed")
    print(
        f"{directory}: {articles:,} articles from {result.messages:,} messages of {topic!r}, "
        f"{result.seconds:.1f} s; the service continues from the group's committed offsets"
    )
    if result.lost:
        print(
            f"newsdedup: warning: {result.lost:,} messages of {topic!r} are no longer retained; "
            "later duplicates of their articles will not be found",
            file=sys.stderr,
        )
    return 0
