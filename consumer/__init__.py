"""newsdedup's service: the Kafka loop, parsing, fingerprinting, deciding and metrics.

`indexstore` (the time-windowed index) is a separate package that knows nothing of this one.
"""

__version__ = "0.1.0"
