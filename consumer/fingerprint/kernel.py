"""The native fingerprint kernel (the Rust crate in `consumer/native/`), built from the same
stop words, word characters, IDF table and sketch tables as the Python path, which stays the
reference and runs instead where the kernel is not built (an install from source without cargo),
as `indexstore.probe.probe_reference` does for the probe kernel."""

from __future__ import annotations

from functools import cache

from consumer.fingerprint.idf import load_idf
from consumer.fingerprint.sketch import native_tables
from consumer.fingerprint.terms import stop_words, word_char_bitmap
from indexstore.probe import NATIVE_PROBE

try:
    from consumer._fastfp import Kernel
except ImportError:
    # Installed from source without cargo: the Python path computes the same fingerprints.
    Kernel = None

NATIVE_FINGERPRINT = Kernel is not None
# What running without each kernel costs (benchmarks/history/2026-11-25.md, "Installed
# without the native kernels"): the warning at start names it.
FALLBACK_COST = {
    "fingerprint": "fingerprinting about 3× slower",
    "probe": "index checks about 6× slower, with more memory",
}


@cache
def load_kernel(idf_path: str | None) -> Kernel | None:
    """One kernel per process and IDF table (its segmenter dictionary, ~0.1 s, is loaded at
    the first Han text); None where the kernel is not built, and the caller runs the Python
    reference."""
    if Kernel is None:
        return None
    table = load_idf(idf_path)
    return Kernel(
        sorted(stop_words()),
        word_char_bitmap(),
        table.keys.astype("<u8").tobytes(),
        table.values.astype("<f8").tobytes(),
        table.median,
        *native_tables(),
    )


def native_kernels() -> dict[str, bool]:
    """Which native kernels this install has: `newsdedup --version` shows it."""
    return {"fingerprint": NATIVE_FINGERPRINT, "probe": NATIVE_PROBE}


def missing_kernels_warning() -> str | None:
    """The one line a process without every kernel prints at start, with what it costs."""
    missing = [name for name, built in native_kernels().items() if not built]
    if not missing:
        return None
    return (
        f"native kernels not built ({', '.join(missing)}): running the pure-Python reference "
        f"code instead, same decisions but {'; '.join(FALLBACK_COST[name] for name in missing)}"
        "; reinstall newsdedup with cargo (Rust 1.85+) on the PATH to build them"
    )
