"""One article decided against the index: the match rules, corrections, boilerplate and what
the index stores of a decision. The records it takes and makes (`Analyzed`, `Decision`) live
in consumer/records/, which every layer shares.

May import: consumer.records, consumer.fingerprint (the sketch), consumer.timetext,
consumer.config, indexstore (scripts/import-layers checks it).
"""
