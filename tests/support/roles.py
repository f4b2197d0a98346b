"""The scale-out roles as real `newsdedup run --role ROLE` subprocesses, and the options every
scale-out test gives them."""

from __future__ import annotations

import subprocess
import uuid

from service_support import NEWSDEDUP, ServiceProcess


class RoleProcess(ServiceProcess):
    """A `newsdedup run --role ROLE` subprocess."""

    def __init__(self, role: str, *args: object, **kwargs: str) -> None:
        super().__init__(*args, **kwargs)
        self.role = role

    def start(self) -> RoleProcess:
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [NEWSDEDUP, "run", "--role", self.role],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return self


def scaleout_options(**more: str) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {
        "scaleout_internal_topic": f"internal-{tag}",
        "scaleout_changelog_topic": f"changelog-{tag}",
        "scaleout_partitions": "6",
        # A dead member's partitions move after this; librdkafka's default is 45 s.
        "kafka_client_session_timeout_ms": "6000",
        # A killed transactional producer's open transaction blocks read_committed readers
        # until the coordinator aborts it.
        "kafka_client_transaction_timeout_ms": "10000",
        "kafka_batch_max_messages": "50",
        "log_format": "json",
        **more,
    }
