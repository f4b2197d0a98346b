"""One article decided against the index: the match rules and the decision message.

May import: consumer.fingerprint (the sketch), consumer.timetext, consumer.config, indexstore
(scripts/import-layers checks it).
"""
