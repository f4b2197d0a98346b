"""The native fingerprint kernel (the Rust crate in `consumer/native/`), built from the same
stop words, word characters, IDF table and sketch tables as the Python path, which stays the
reference."""

from __future__ import annotations

from functools import cache

from consumer._fastfp import Kernel
from consumer.idf import load_idf
from consumer.sketch import native_tables
from consumer.terms import stop_words, word_char_bitmap


@cache
def load_kernel(idf_path: str | None) -> Kernel:
    """One kernel per process and IDF table (its segmenter dictionary costs ~0.1 s to load)."""
    table = load_idf(idf_path)
    return Kernel(
        sorted(stop_words()),
        word_char_bitmap(),
        table.keys.astype("<u8").tobytes(),
        table.values.astype("<f8").tobytes(),
        table.median,
        *native_tables(),
    )
