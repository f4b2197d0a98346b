"""Benchmarks behind `newsdedup bench`, which need no broker; each module exposes
`register(subparsers)`. The Kafka benchmarks need a checkout and live in benchmarks/.

May import: consumer.scaleout and everything below it (not consumer.cli).
"""
