"""Runs newsdedup as the service: the evaluation feed through a real broker and `newsdedup run`.

What `check` cannot show: the order in which the service reads a multi-partition feed. The
feed's articles are spread over the input topic's partitions at random (seeded; each partition
keeps publish order), all of them produced before the service starts (a backlog, as after an
outage or for a replay), and the service is stopped once when half of them are decided
(SIGTERM, or SIGKILL) and started again on the same state. The output topic is then read from
the start (read_committed) and the latest decision per key (the article id) is the service's
answer, scored like `check`'s; articles dead-lettered count as not flagged, as in `check`.

`--role all` runs one `newsdedup run`; `--role scaleout` runs three `run --role fingerprint`
instances (one fingerprinting worker each) and one `run --role decide`. The run's topics and
the producer of the backlog are consumer/evaluation/kafka_feed.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from consumer.errors import NewsdedupError
from consumer.evaluation.check import ContractError, decision_from_record
from consumer.evaluation.feed import Article
from consumer.evaluation.kafka_feed import Backlog, Topics, client_settings
from consumer.evaluation.runs import Decision, Run
from consumer.records import DecisionKind

SYSTEM = "newsdedup-kafka"
ROLES = ("all", "scaleout")
DELIVERIES = ("at_least_once", "exactly_once")
RESTARTS = ("term", "kill")
FINGERPRINT_INSTANCES = 3

# Tests may replace it; the service is this Python's, so a checkout runs its own code.
RUN_COMMAND: tuple[str, ...] = (sys.executable, "-m", "consumer.cli", "run")

# After the last article is decided, how long the topics must stay quiet before reading
# stops: records that follow (a correction, a re-sent decision) are counted too.
SETTLE_S = 3.0
# No new decision for this long means the service is stuck (a start takes seconds).
STALL_S = 180.0
# A SIGTERM'd instance finishes its batch and exits within [service] stop_timeout (8 s).
STOP_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    bootstrap_servers: str | None = None  # None: a private scripts/kafka-local broker
    partitions: int = 3
    role: str = "all"
    delivery: str = "at_least_once"
    restart: str = "term"
    seed: int = 0


@dataclass(slots=True)
class Delivered:
    """What the service wrote, read back from its output and dead-letter topics."""

    role: str
    partitions: int
    delivery: str
    restart: str
    articles: int
    records: int = 0  # decision records read
    decided: int = 0  # feed articles with at least one decision
    rejected: int = 0  # feed articles dead-lettered and never decided
    undecided: int = 0  # feed articles with neither
    repeated: int = 0  # records giving again the answer their key already had
    changed: int = 0  # records changing it (what a correction does)
    foreign: int = 0  # records for no article of the feed, or keyed by another id
    late: int = 0  # latest decisions marked late
    matched_later: int = 0  # latest decisions flagged against a later-published article
    decided_before_restart: int = 0
    restart_exit_codes: list[int | None] = field(default_factory=list)  # None: killed
    seconds: float = 0.0  # from the first start to the last decision


def matched_later(run: Run, articles: Sequence[Article]) -> int:
    """Articles flagged as copies of an article published after them: with publish order
    respected, impossible (a copy is never earlier than what it copies)."""
    published = {a.id: a.published_at for a in articles}
    return sum(
        1
        for d in run.decisions
        if d.flagged and d.matched_id in published and published[d.matched_id] > published[d.id]
    )


def run_through_kafka(
    articles: Sequence[Article],
    config: Path | None,
    options: KafkaOptions,
    environment: dict[str, str] | None = None,
) -> tuple[Run, Delivered]:
    """The service's latest decision per article, and what it delivered. Never raises for a
    failing service: the run carries the error, so the other systems are still reported.
    `environment` is added to the service's (a window, say)."""
    from consumer.bench.harness import PrivateBroker

    delivered = Delivered(
        options.role, options.partitions, options.delivery, options.restart, len(articles)
    )
    latest: dict[str, Decision] = {}
    try:
        with PrivateBroker(options.bootstrap_servers) as bootstrap:
            topics = Topics.create(bootstrap, options.partitions)
            try:
                # The restart falls between the feed's two halves: the second is published
                # only once the first is answered, so however fast the service, it is
                # restarted in the middle of the feed. Each half is in publish order, so
                # this keeps check's order.
                feed = Backlog(bootstrap, topics.input, articles, options.partitions, options.seed)
                feed.produce(0, (len(articles) + 1) // 2)
                with tempfile.TemporaryDirectory(prefix="newsdedup-eval-kafka-") as tmp:
                    service = _Service(
                        bootstrap, topics, options, config, Path(tmp), environment or {}
                    )
                    try:
                        latest, error = _read_decisions(
                            bootstrap,
                            topics,
                            articles,
                            service,
                            delivered,
                            lambda: feed.produce((len(articles) + 1) // 2, len(articles)),
                        )
                    finally:
                        service.kill()
            finally:
                topics.delete(bootstrap)
    except NewsdedupError as e:
        error = str(e)
    except KafkaException as e:
        error = f"broker: {e.args[0].str() if e.args else e}"
    decisions = tuple(latest.get(a.id) or Decision(a.id, DecisionKind.UNIQUE) for a in articles)
    run = Run(SYSTEM, decisions, delivered.seconds, error)
    delivered.matched_later = matched_later(run, articles)
    return run, delivered


# -- the service's processes ------------------------------------------------------------------


class _Instance:
    """One `newsdedup run` process, its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.command, self.env, self.log = name, command, env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, how: str) -> int | None:
        """SIGTERM and wait for the exit code, or SIGKILL (None)."""
        assert self.process is not None
        if how == "kill":
            self.process.kill()
            self.process.wait()
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise NewsdedupError(
                f"{self.name} did not stop within {STOP_WAIT_S:.0f} s of SIGTERM"
            ) from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def last_line(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "(no output)"


class _Service:
    """The service as one `--role all` instance or the scale-out roles, on one state dir."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        options: KafkaOptions,
        config: Path | None,
        scratch: Path,
        environment: dict[str, str],
    ) -> None:
        from consumer.bench.harness import free_port

        group = f"newsdedup-eval-{uuid.uuid4().hex[:8]}"
        common = {
            **os.environ,
            **environment,
            "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "NEWSDEDUP_KAFKA_INPUT_TOPIC": topics.input,
            "NEWSDEDUP_KAFKA_OUTPUT_TOPIC": topics.output,
            "NEWSDEDUP_KAFKA_DLQ_TOPIC": topics.dlq,
            "NEWSDEDUP_KAFKA_GROUP_ID": group,
            "NEWSDEDUP_KAFKA_DELIVERY": options.delivery,
            "NEWSDEDUP_SCALEOUT_INTERNAL_TOPIC": topics.internal,
            "NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": topics.changelog,
            # A killed member holds its partitions until its session expires (librdkafka's
            # default: 45 s); the restart should not wait that long.
            "NEWSDEDUP_KAFKA_CLIENT_SESSION_TIMEOUT_MS": "6000",
        }
        command = list(RUN_COMMAND) + (["--config", str(config)] if config else [])
        if options.role == "all":
            roles = [("all", 0)]
        else:
            roles = [("fingerprint", n) for n in range(FINGERPRINT_INSTANCES)] + [("decide", 0)]
        self.instances = []
        for role, n in roles:
            name = f"run --role {role}" + (f" #{n}" if options.role != "all" else "")
            env = {
                **common,
                "NEWSDEDUP_INDEX_PATH": str(scratch / f"state-{role}-{n}"),
                "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
                "NEWSDEDUP_SCALEOUT_INSTANCE_ID": f"{role}-{n}",
            }
            if role == "fingerprint":
                # The instances are the parallelism: one worker each on a shared machine.
                env["NEWSDEDUP_SERVICE_WORKERS"] = "1"
            self.instances.append(
                _Instance(name, [*command, "--role", role], env, scratch / f"{role}-{n}.log")
            )

    def start(self) -> None:
        for instance in self.instances:
            instance.start()

    def restart(self, how: str) -> list[int | None]:
        codes = [instance.stop(how) for instance in self.instances]
        self.start()
        return codes

    def failure(self) -> str | None:
        for instance in self.instances:
            code = instance.exited()
            if code is not None:
                return f"{instance.name} exited {code}: {instance.last_line()}"
        return None

    def kill(self) -> None:
        for instance in self.instances:
            instance.kill()


# -- reading the answers ----------------------------------------------------------------------


def _read_decisions(
    bootstrap: str,
    topics: Topics,
    articles: Sequence[Article],
    service: _Service,
    delivered: Delivered,
    produce_the_rest: Callable[[], None],
) -> tuple[dict[str, Decision], str | None]:
    """Start the service; once half the feed is answered, restart it and `produce_the_rest`;
    read its decisions until every article is answered and nothing more comes: the latest
    decision per article, and an error if any."""
    feed_ids = {a.id for a in articles}
    reader = Consumer(
        client_settings(
            bootstrap,
            **{
                "group.id": f"newsdedup-eval-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    reader.assign(
        [TopicPartition(topics.output, p, OFFSET_BEGINNING) for p in range(delivered.partitions)]
        + [TopicPartition(topics.dlq, 0, OFFSET_BEGINNING)]
    )
    latest: dict[str, Decision] = {}
    latest_late: dict[str, bool] = {}
    partition_of_key: dict[str, int] = {}
    dead_lettered: set[str] = set()
    answered = 0  # feed articles decided or dead-lettered
    error: str | None = None
    started = time.perf_counter()
    last_new = last_answer = started
    service.start()
    try:
        while True:
            now = time.perf_counter()
            if answered == len(feed_ids) and now - last_new >= SETTLE_S:
                break
            if now - last_new >= STALL_S:
                error = (
                    f"stalled: nothing new for {STALL_S:.0f} s; "
                    f"{answered:,} of {len(feed_ids):,} articles answered"
                )
                break
            error = service.failure()
            if error:
                break
            if not delivered.restart_exit_codes and 2 * answered >= len(feed_ids):
                delivered.decided_before_restart = answered
                delivered.restart_exit_codes = service.restart(delivered.restart)
                produce_the_rest()
                last_new = time.perf_counter()
                continue
            for message in reader.consume(500, 0.1):
                if message.error():
                    continue
                last_new = time.perf_counter()
                key = (message.key() or b"").decode("utf-8", errors="replace")
                if message.topic() == topics.dlq:
                    if key in feed_ids and key not in dead_lettered and key not in latest:
                        answered += 1
                        last_answer = last_new
                    dead_lettered.add(key)
                    continue
                delivered.records += 1
                try:
                    record = json.loads(message.value())
                    decision = decision_from_record(record)
                except (ValueError, TypeError, ContractError):
                    delivered.foreign += 1
                    continue
                if decision.id != key or key not in feed_ids:
                    delivered.foreign += 1
                    continue
                if partition_of_key.setdefault(key, message.partition()) != message.partition():
                    # Latest per key is only defined within one partition.
                    error = f"decisions for {key!r} in two output partitions"
                previous = latest.get(key)
                if previous is None:
                    if key not in dead_lettered:
                        answered += 1
                        last_answer = last_new
                elif previous == decision:
                    delivered.repeated += 1
                else:
                    delivered.changed += 1
                latest[key] = decision
                latest_late[key] = record.get("late") is True
            if error:
                break
    except NewsdedupError as e:
        error = str(e)
    finally:
        reader.close()
    delivered.seconds = last_answer - started
    delivered.decided = len(latest)
    delivered.rejected = len((dead_lettered & feed_ids) - set(latest))
    delivered.undecided = len(feed_ids) - delivered.decided - delivered.rejected
    delivered.late = sum(latest_late.values())
    return latest, error
