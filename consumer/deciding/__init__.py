"""One article decided against the index: the match rules and the decision message.

May import: consumer.fingerprint (the sketch), consumer.stream.workers and
consumer.stream.parsing (value types), indexstore, consumer.config.
"""
