"""Accuracy evaluation (`newsdedup eval`): a feed with known near-duplicates, the baselines,
and precision/recall of newsdedup's decisions measured through its `check` command.
"""
