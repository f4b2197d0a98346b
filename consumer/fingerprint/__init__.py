"""Text in, fingerprint out: normalization, terms and their weights, SimHash, the verification
sketch, and the native kernel that computes them.

May import: consumer.config, consumer.errors.
"""
