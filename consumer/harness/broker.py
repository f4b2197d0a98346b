"""A broker for one run, and the run's own topics on it.

The installed package has no broker of its own: the caller gives a bootstrap, or the path of a
checkout's scripts/kafka-local, which starts a private broker for the run's life. Looking for
that script next to this file would find nothing in an installed package.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from consumer.errors import NewsdedupError

# The harness's own clients log nothing: librdkafka reports passing states (a coordinator
# still loading, the private broker going away at the end) that are no fault, and every real
# failure reaches the run as an exception, a delivery error or a stall.
_QUIET = logging.getLogger("newsdedup.harness.kafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def client_settings(bootstrap: str, **settings: object) -> dict[str, object]:
    """The configuration of one of the harness's own clients (quiet, see above)."""
    return {"bootstrap.servers": bootstrap, "logger": _QUIET, **settings}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrivateBroker:
    """The given bootstrap, or a private broker started with `kafka_local` (a checkout's
    scripts/kafka-local) for the life of the `with` block."""

    def __init__(self, bootstrap: str | None, kafka_local: Path | None) -> None:
        self.bootstrap, self.kafka_local = bootstrap, kafka_local
        self.env: dict[str, str] | None = None

    def __enter__(self) -> str:
        if self.bootstrap:
            return self.bootstrap
        if self.kafka_local is None or not self.kafka_local.is_file():
            raise NewsdedupError(
                "no --bootstrap-servers given: give a broker, or --kafka-local with the path of "
                "a source checkout's scripts/kafka-local, which starts a private one"
                + (f" ({self.kafka_local} does not exist)" if self.kafka_local else "")
            )
        self._dir = tempfile.TemporaryDirectory(prefix="newsdedup-kafka-")
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(free_port()),
            "KAFKA_CONTROLLER_PORT": str(free_port()),
            "KAFKA_DATA_DIR": self._dir.name,
            "KAFKA_HEAP": "-Xmx1g",
            "PYTHON": sys.executable,
        }
        out = subprocess.run(
            [str(self.kafka_local), "start"], env=self.env, capture_output=True, text=True
        )
        if out.returncode != 0:
            self._dir.cleanup()
            self.env = None
            raise NewsdedupError(f"could not start a broker: {out.stderr.strip()[-500:]}")
        bootstrap: str = out.stdout.strip().splitlines()[-1]
        return bootstrap

    def __exit__(self, *exc: object) -> None:
        if self.env is not None:
            assert self.kafka_local is not None
            subprocess.run([str(self.kafka_local), "stop"], env=self.env, capture_output=True)
            self._dir.cleanup()


@dataclass(frozen=True, slots=True)
class Topics:
    """One run's topics, named after it: input, output, dead letters and the scale-out's two."""

    input: str
    output: str
    dlq: str
    internal: str
    changelog: str

    @classmethod
    def create(cls, bootstrap: str, partitions: int, prefix: str) -> Topics:
        run = f"{prefix}-{uuid.uuid4().hex[:8]}"
        topics = cls(*(f"{run}.{name}" for name in ("in", "out", "dlq", "internal", "changelog")))
        # The scale-out topics are left to the roles, which create them as configured.
        wanted = [
            NewTopic(topics.input, partitions, 1),
            NewTopic(topics.output, partitions, 1),
            NewTopic(topics.dlq, 1, 1),
        ]
        admin = AdminClient(client_settings(bootstrap))  # alive until the results came
        for future in admin.create_topics(wanted).values():
            future.result(30)
        return topics

    def delete(self, bootstrap: str) -> None:
        # Best effort: a private broker goes away anyway; a given one keeps nothing of ours.
        names = [self.input, self.output, self.dlq, self.internal, self.changelog]
        admin = AdminClient(client_settings(bootstrap))
        for future in admin.delete_topics(names).values():
            with contextlib.suppress(Exception):  # a topic the run never created, say
                future.result(30)
