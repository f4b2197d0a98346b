"""A time-windowed RocksDB index of 64-bit SimHash fingerprints with exact Hamming search.

It knows fingerprints, event time and RocksDB; nothing of Kafka or of the service.
"""
