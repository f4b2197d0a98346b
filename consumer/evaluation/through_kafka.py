"""Runs newsdedup as the service: the evaluation feed through a real broker and `newsdedup run`.

What `check` cannot show: the order in which the service reads a multi-partition feed. The
feed's articles are spread over the input topic's partitions at random (seeded; each partition
keeps publish order), all of them produced before the service starts (a backlog, as after an
outage or for a replay), and the service is stopped once when half of them are decided
(SIGTERM, or SIGKILL) and started again on the same state. The output topic is then read from
the start (read_committed) and the latest decision per key (the article id) is the service's
answer, scored like `check`'s; articles dead-lettered count as not flagged, as in `check`.

`--role all` runs one `newsdedup run`; `--role scaleout` runs three `run --role fingerprint`
instances (one fingerprinting worker each) and one `run --role decide`. The broker, the run's
topics and the service's processes are the shared Kafka harness (consumer/harness/); the
backlog is produced by kafka_feed.py and the answers read back by kafka_answers.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException

from consumer.errors import NewsdedupError
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.kafka_answers import Delivered, read_answers
from consumer.evaluation.kafka_feed import Backlog
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.harness.broker import PrivateBroker, Topics, free_port
from consumer.harness.service import RUN_COMMAND, ServiceProcess, service_env
from consumer.records import DecisionKind

SYSTEM = "newsdedup-kafka"
ROLES = ("all", "scaleout")
DELIVERIES = ("at_least_once", "exactly_once")
RESTARTS = ("term", "kill")
FINGERPRINT_INSTANCES = 3


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    bootstrap_servers: str | None = None  # None: a private broker started by kafka_local
    partitions: int = 3
    role: str = "all"
    delivery: str = "at_least_once"
    restart: str = "term"
    seed: int = 0
    kafka_local: Path | None = None  # a source checkout's scripts/kafka-local


def matched_later(run: SystemRun, articles: Sequence[FeedArticle]) -> int:
    """Articles flagged as copies of an article published after them: with publish order
    respected, impossible (a copy is never earlier than what it copies)."""
    published = {a.id: a.published_at for a in articles}
    return sum(
        1
        for d in run.decisions
        if d.flagged and d.matched_id in published and published[d.matched_id] > published[d.id]
    )


def run_through_kafka(
    articles: Sequence[FeedArticle],
    config: Path | None,
    options: KafkaOptions,
    environment: dict[str, str] | None = None,
) -> tuple[SystemRun, Delivered]:
    """The service's latest decision per article, and what it delivered. Never raises for a
    failing service: the run carries the error, so the other systems are still reported.
    `environment` is added to the service's (a window, say)."""
    delivered = Delivered(
        options.role, options.partitions, options.delivery, options.restart, len(articles)
    )
    latest: dict[str, SystemAnswer] = {}
    try:
        with PrivateBroker(options.bootstrap_servers, options.kafka_local) as bootstrap:
            topics = Topics.create(bootstrap, options.partitions, "newsdedup-eval")
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
                        latest, error = read_answers(
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
    decisions = tuple(latest.get(a.id) or SystemAnswer(a.id, DecisionKind.UNIQUE) for a in articles)
    run = SystemRun(SYSTEM, decisions, delivered.seconds, error)
    delivered.matched_later = matched_later(run, articles)
    return run, delivered


# -- the service's processes ------------------------------------------------------------------


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
        common = {
            **service_env(bootstrap, topics, "newsdedup-eval", options.delivery),
            **environment,
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
                ServiceProcess(name, [*command, "--role", role], env, scratch / f"{role}-{n}.log")
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
                return f"{instance.name} exited {code}: {instance.last_lines()}"
        return None

    def kill(self) -> None:
        for instance in self.instances:
            instance.kill()
