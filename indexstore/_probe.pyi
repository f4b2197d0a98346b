"""Types of the compiled probe kernel (indexstore/native/src/lib.rs, built by PyO3), which
carries none: mypy cannot read a compiled module. Keep this in step with the Rust signature.
When the kernel is not built, importing it fails and indexstore.probe runs the NumPy
reference instead, so the stub never stands in for a missing module at run time."""

import numpy as np
import numpy.typing as npt

def probe(
    queries: npt.NDArray[np.uint64],
    offsets: npt.NDArray[np.int64],
    keys: npt.NDArray[np.uint64],
    masks: npt.NDArray[np.uint64],
    bits: int,
    k: int,
    /,
) -> tuple[bytes, bytes, bytes]:
    """(query index, key position, distance) of every hit, each as int64 bytes."""

class KeyTally:
    """A running count per 32-bit key (indexstore/native/src/tally.rs)."""

    def __init__(self) -> None: ...
    def add(self, keys: npt.NDArray[np.uint32], sign: int, /) -> None: ...
    def get(self, keys: npt.NDArray[np.uint32], /) -> bytes:
        """The count of each key, as int64 bytes."""
    def __len__(self) -> int: ...

class KeyPostings:
    """The rows posted under each 32-bit key (indexstore/native/src/postings.rs)."""

    def __init__(self) -> None: ...
    def add(self, row: int, keys: npt.NDArray[np.uint32], /) -> None: ...
    def sharing(self, keys: npt.NDArray[np.uint32], min_shared: int, /) -> tuple[bytes, bytes]:
        """The rows posted under at least `min_shared` of `keys` and under how many, as int64
        bytes each, in the order a row is first named."""
    def __len__(self) -> int: ...
