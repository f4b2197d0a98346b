"""The benchmarks that need a source checkout: the whole service against a Kafka broker.

    python -m benchmarks pipeline|soak|restore|scaleout --help   (from the checkout's root)

They are no part of the installed package: they start a private broker with the checkout's
scripts/kafka-local (or use --bootstrap-servers), and run the service through the Kafka
harness that `newsdedup eval --through-kafka` uses too (consumer/harness/). The benchmarks a
user runs on their own data without a broker stay installed: `newsdedup bench fingerprint`
and `newsdedup bench index`. benchmarks/history/ holds the dated results.
"""

from pathlib import Path

# The checkout's broker script: found next to this file, which only a checkout has.
KAFKA_LOCAL = Path(__file__).resolve().parent.parent / "scripts" / "kafka-local"
