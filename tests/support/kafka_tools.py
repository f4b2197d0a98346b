"""Kafka's own operator tools (ConsumerGroupCommand, ...) against the test broker, run as an
operator runs them: through `scripts/kafka-local tool`, which fetches their jars once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

KAFKA_LOCAL = Path(__file__).resolve().parents[2] / "scripts" / "kafka-local"
# A cold JVM on a busy 2-core machine, plus the jars' download on the first call.
TOOL_TIMEOUT_S = 300


def kafka_tool(tool: str, *args: str) -> str:
    """What the tool printed (stdout, then stderr without the SLF4J binding notice); fails
    when it exits non-zero. Note that ConsumerGroupCommand reports a refused reset with
    "Error: ..." and exit 0: callers check the text."""
    result = subprocess.run(
        [str(KAFKA_LOCAL), "tool", tool, *args],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
        env=os.environ,
    )
    stderr = "\n".join(line for line in result.stderr.splitlines() if "SLF4J" not in line)
    output = f"{result.stdout}\n{stderr}".strip()
    assert result.returncode == 0, f"{tool} exited {result.returncode}:\n{output}"
    return output


def reset_offsets_to_earliest(bootstrap: str, group: str, topic: str) -> str:
    """`kafka-consumer-groups --reset-offsets --to-earliest --execute` for one topic."""
    return kafka_tool(
        "ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
        "--group",
        group,
        "--topic",
        topic,
        "--reset-offsets",
        "--to-earliest",
        "--execute",
    )
