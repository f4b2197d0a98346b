"""Sizes fixed by the fingerprint's format that the configuration's checks also need.

They live below both (scripts/import-layers puts this module in the lowest layer), so the
sketch does not take its format from the configuration, and the configuration can still
refuse an option the format cannot hold.
"""

# Texts shorter than this (normalized characters) carry a key of their letters and digits
# beside their sketch (consumer/fingerprint/sketch.py), which is what a short text is matched
# by; so the short-text limit ([match] short_text_chars) cannot exceed it.
LETTERS_KEY_CHARS = 256
