"""Accuracy evaluation (`newsdedup eval`): a feed with known near-duplicates, the baselines,
and precision/recall of newsdedup's decisions measured through its `check` command.

May import: consumer.harness (the Kafka harness of `--through-kafka`) and every package below
it (not consumer.bench or consumer.cli).
"""
