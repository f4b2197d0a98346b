"""The scale-out roles (`run --role fingerprint|decide`): their topics, wire format, domains, the
decide role's order and the changelog.

May import: consumer.stream and everything it may.
"""
