"""The runtime the roles (consumer/roles/) share: the Kafka loop of `newsdedup run` and the
steps it drives: parsing, the worker pool, event-time order, deciding a batch (the one driver,
pipeline.py), the commit protocol.

May import: consumer.fingerprint, consumer.deciding, consumer.ops, indexstore.
"""
