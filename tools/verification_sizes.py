"""What `tools/accuracy-prototype --sizes` prints: the size per article of the verification
formats it weighs, kept apart from the replay itself."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _varint_bytes(gaps: np.ndarray) -> int:
    n = np.ones(len(gaps), dtype=np.int64)
    for shift in (7, 14, 21, 28):
        n += gaps >= (1 << shift)
    return int(n.sum())


def _rice_bytes(gaps: np.ndarray) -> int:
    """Golomb-Rice code of the gaps with the best parameter, plus a byte naming it."""
    bits = min(int(((gaps >> k) + 1 + k).sum()) for k in range(32))
    return (bits + 7) // 8 + 1


def print_verification_sizes(shingles: Sequence[np.ndarray]) -> None:
    """Bytes per article of the on-disk verification formats: sorted 32-bit shingle hashes
    (all, or the smallest N), as gaps in varints or in a Rice code (+2 bytes of count)."""
    counts = np.array([len(s) for s in shingles])
    print(
        f"shingles per article: median {np.median(counts):.0f} mean {counts.mean():.0f} "
        f"p90 {np.percentile(counts, 90):.0f}; over 256: {(counts > 256).mean():.1%}, "
        f"over 512: {(counts > 512).mean():.1%}"
    )
    for label, n in (("exact", None), ("bottom512", 512), ("bottom256", 256)):
        varint, rice = [], []
        for s in shingles:
            gaps = np.diff(s[:n].astype(np.uint64), prepend=np.uint64(0))
            varint.append(_varint_bytes(gaps) + 2)
            rice.append(_rice_bytes(gaps) + 2)
        print(
            f"  {label:10} varint median {np.median(varint):5.0f} mean {np.mean(varint):5.0f} "
            f"p90 {np.percentile(varint, 90):5.0f} | rice median {np.median(rice):5.0f} "
            f"mean {np.mean(rice):5.0f} p90 {np.percentile(rice, 90):5.0f}"
        )
