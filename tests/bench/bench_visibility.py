"""What a visibility API request costs the controller's event loop (controller/core/queue/visibility.py,
answered between admission cycles on the loop they run on).

    .venv/bin/python -m tests.bench.bench_visibility [--pending 1000 10000 50000] [--repeat 5]

One ClusterQueue (no quota, so everything stays pending) with `--pending` Workloads in 10
LocalQueues; prints the time of one request for the ClusterQueue's first page (Kueue's
default limit 1,000), its last page, a LocalQueue's Workloads, and one admission cycle on
the same state for scale: a request delays the next cycle by at most that long, and adds
nothing to a cycle when no one asks. Each request is timed three ways: `sorted`, the first
request after the pending Workloads changed (one sort, as the server pays it then); `kept`,
with the order kept from an earlier request and the queue untouched since; `after cycle`,
kept but a cycle has popped and parked the heads again since (the queue is sorted again,
quick on its sorted runs, and the places counted are kept). Figures, not assertions; the pytest function runs a small size and checks the
answers.
"""

from __future__ import annotations

import argparse
import statistics
import time

from controller.core.model.clusterqueues import LocalQueue
from controller.core.queue.visibility import (
    PendingOrder,
    pending_in_cluster_queue,
    pending_in_local_queue,
)
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, wl

LOCAL_QUEUES = 10


def build(pending: int) -> ClusterState:
    state = cluster(cq("cq", {"default": {"cpu": "0"}}))
    for n in range(LOCAL_QUEUES):
        state.set_local_queue(LocalQueue("ns", f"lq{n}", "cq"))
    add(
        state,
        *(
            wl(f"w{n}", f"lq{n % LOCAL_QUEUES}", priority=n % 7, created=float(n), cpu=1)
            for n in range(pending)
        ),
    )
    run_cycle(state, 0.0)  # the heads tried once: parked as inadmissible
    return state


def timed(repeat: int, call: object) -> float:
    """Median milliseconds of `repeat` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


REQUESTS = ("cq first page", "cq last page", "lq all")


def measure(pending: int, repeat: int) -> dict[str, float]:
    state = build(pending)
    figures = {"one cycle": timed(1, lambda: run_cycle(state, 1.0))}  # every head tried again
    last = max(0, pending - 1000)
    requests = {
        "cq first page": lambda orders: pending_in_cluster_queue(state, "cq", orders=orders),
        "cq last page": lambda orders: pending_in_cluster_queue(
            state, "cq", offset=last, orders=orders
        ),
        "lq all": lambda orders: pending_in_local_queue(
            state, "ns", "lq0", limit=100_000, orders=orders
        ),
    }
    for name, request in requests.items():
        figures[f"{name} sorted"] = timed(repeat, lambda request=request: request(None))
        kept = PendingOrder()
        request(kept)
        figures[f"{name} kept"] = timed(repeat, lambda request=request, kept=kept: request(kept))
        samples: list[float] = []
        for _ in range(repeat):
            state.queues["cq"].retry_inadmissible()  # every head offered and tried again
            run_cycle(state, 1.0)
            start = time.perf_counter()
            request(kept)
            samples.append((time.perf_counter() - start) * 1000)
        figures[f"{name} after cycle"] = statistics.median(samples)
        assert kept.new_orders == 1, kept.new_orders  # the pending Workloads are the same
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[1000, 10_000, 50_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("median ms per request: sorted / kept / after cycle")
    print(f"{'pending':>8}  " + "  ".join(f"{name:>22}" for name in REQUESTS) + "  one cycle")
    for pending in args.pending:
        f = measure(pending, args.repeat)
        cells = [
            f"{f[f'{n} sorted']:6.1f} /{f[f'{n} kept']:5.1f} /{f[f'{n} after cycle']:5.1f}"
            for n in REQUESTS
        ]
        print(
            f"{pending:>8}  " + "  ".join(f"{c:>22}" for c in cells) + f"  {f['one cycle']:6.1f}",
            flush=True,
        )


def test_visibility_request_cost() -> None:
    figures = measure(2000, 1)
    print(f"\nvisibility request, 2,000 pending: {figures}")
    state = build(2000)
    orders = PendingOrder()
    assert len(pending_in_cluster_queue(state, "cq", orders=orders) or []) == 1000
    assert len(pending_in_local_queue(state, "ns", "lq0", orders=orders) or []) == 200
    assert orders.sorts == orders.new_orders == 1


if __name__ == "__main__":
    main()
