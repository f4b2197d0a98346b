"""Durations and sizes as an operator writes them ("500ms", "72h", "256MiB"), and their values.

The configuration's options of these kinds (consumer/config.py) are `Duration` and `Size`: the
text as written, parsed once into milliseconds or bytes. The commands that take a duration on
their command line (`index expire --retention`, and the checkout's `python -m benchmarks soak
--retention`) parse it by the same rules. It imports nothing of newsdedup.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """'90s', '1h', '72h', '500ms', '2d' → milliseconds; a bare number means seconds."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 30s, 5m, 1h, 3d)")
    value, unit = float(m.group(1)), m.group(2) or "s"
    return int(value * _DURATION_UNITS_MS[unit])


class Duration(str):
    """A duration as the configuration writes it ("2s", "72h"), parsed once: `.ms`."""

    ms: int

    def __new__(cls, text: object) -> Duration:
        self = super().__new__(cls, str(text))
        self.ms = parse_duration_ms(self)  # ValueError names a bad one
        return self

    @property
    def seconds(self) -> float:
        return self.ms / 1000


class Size(str):
    """A size as the configuration writes it ("256MiB"), parsed once: `.bytes`."""

    bytes: int

    def __new__(cls, text: object) -> Size:
        self = super().__new__(cls, str(text))
        self.bytes = parse_size_bytes(self)
        return self


def parse_size_bytes(text: str) -> int:
    """'256MiB', '1GiB', '64KiB', '1000000' → bytes."""
    m = re.match(r"^\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*$", str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 64KiB, 256MiB, 1GiB)")
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2) or "B"]
    return int(m.group(1)) * scale
