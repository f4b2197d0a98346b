"""The Kafka loop of `newsdedup run` and the steps it drives: parsing, the worker pool, event-time
order, deciding a batch, the commit protocol, the index's replay.

May import: consumer.fingerprint, consumer.deciding, consumer.ops, indexstore.
"""
