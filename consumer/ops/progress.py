"""Progress lines for long CLI commands: shown on a terminal, silent in pipes and logs."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts work and redraws one status line on stderr at most five times a second.

    Silent unless stderr is a terminal, so piped and CI output stays clean.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "items",
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.count = 0
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._started = time.monotonic()
        self._last_draw = 0.0

    def advance(self, n: int = 1) -> None:
        self.count += n
        if self._enabled:
            now = time.monotonic()
            if now - self._last_draw >= 0.2:
                self._last_draw = now
                self._draw(now)

    def close(self) -> None:
        if self._enabled:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._started, 1e-9)
        rate = self.count / elapsed
        done = f"{self.count:,}" if self.total is None else f"{self.count:,}/{self.total:,}"
        self._stream.write(
            f"\r{self.label}: {done} {self.unit}, {rate:,.0f}/s, {elapsed:,.0f}s elapsed"
        )
        self._stream.flush()
