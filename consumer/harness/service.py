"""`newsdedup run` processes for a run's topics: their environment, and each one's life."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from consumer.errors import NewsdedupError
from consumer.harness.broker import Topics

# The service is this Python's, so a checkout runs its own code; tests may replace it.
RUN_COMMAND: tuple[str, ...] = (sys.executable, "-m", "consumer.cli", "run")

# A SIGTERM'd instance finishes its batch and exits within [service] stop_timeout (8 s).
STOP_WAIT_S = 30.0


def service_env(bootstrap: str, topics: Topics, group_prefix: str, delivery: str) -> dict[str, str]:
    """This process's environment plus what points a service at the run's broker and topics,
    in a consumer group of its own."""
    return {
        **os.environ,
        "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "NEWSDEDUP_KAFKA_INPUT_TOPIC": topics.input,
        "NEWSDEDUP_KAFKA_OUTPUT_TOPIC": topics.output,
        "NEWSDEDUP_KAFKA_DLQ_TOPIC": topics.dlq,
        "NEWSDEDUP_KAFKA_GROUP_ID": f"{group_prefix}-{uuid.uuid4().hex[:8]}",
        "NEWSDEDUP_KAFKA_DELIVERY": delivery,
    }


class ServiceProcess:
    """One `newsdedup run` process, its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.command, self.env, self.log = name, command, env, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, how: str) -> int | None:
        """SIGTERM ("term") and wait for the exit code, or SIGKILL ("kill": None)."""
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

    def last_lines(self, characters: int = 0) -> str:
        """The log's last line, or its last `characters` characters."""
        text = self.log.read_text(errors="replace").strip()
        if characters:
            return text[-characters:]
        lines = text.splitlines()
        return lines[-1] if lines else "(no output)"
