"""Accuracy evaluation (`newsdedup eval`): a feed with known near-duplicates, the baselines,
and precision/recall of newsdedup's decisions measured through its `check` command.

May import: consumer.bench and every package below consumer.scaleout (not consumer.cli).
"""
