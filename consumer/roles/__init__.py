"""The split roles of `newsdedup run --role fingerprint|decide` and what they share."""
