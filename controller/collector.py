"""The cyclic garbage collector's thresholds for the processes that hold tens of thousands
of Workloads: `quotagate run` and the bench's live runs (`quotagate bench --live`,
`--api-floor`, `make bench-compare`).

At Python's default (a young collection every 700 allocations) the collector took 27 % of
an admission cycle over 1,000 ClusterQueues and 50,000 Workloads, and half the time of
applying the initial list (docs/benchmark.md). The bench was left at the default until
stop 36: in a baseline run it spent 15.3 s of its 47.5 s of CPU collecting (20 full
collections of about 0.5 s each over the Workloads it follows), on the same two cores as
the controller it measures. Reference counting frees nearly everything these processes
drop; the collector is only for reference cycles, which they rarely make.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GC_THRESHOLDS", "tune", "tuned"]

GC_THRESHOLDS = (50_000, 20, 10)


def tune() -> None:
    """Set the thresholds for the rest of the process (`quotagate run`)."""
    gc.set_threshold(*GC_THRESHOLDS)


@contextmanager
def tuned() -> Iterator[None]:
    """The thresholds for a block (a bench run inside a longer process), then the ones
    before it again."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
