"""Benchmarks behind `newsdedup bench`; each module exposes `register(subparsers)`."""
