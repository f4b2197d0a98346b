"""Benchmarks behind `newsdedup bench`; each module exposes `register(subparsers)`.

May import: consumer.scaleout and everything below it (not consumer.cli).
"""
