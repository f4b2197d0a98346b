"""newsdedup's service: the Kafka loop, parsing, fingerprinting, deciding and metrics.

`indexstore` (the time-windowed index) is a separate package that knows nothing of this one.
"""

import os

__version__ = "0.1.0"

# NumPy loads OpenBLAS, which starts a thread per core that spins for ~0.1 CPU-second before
# it sleeps: in every process, each fingerprinting worker too. newsdedup does no linear
# algebra, so the calling thread is all OpenBLAS needs. Set before anything imports NumPy (the
# workers inherit it); an operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
