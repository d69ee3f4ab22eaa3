"""What a visibility API request costs the controller's event loop (controller/core/visibility.py,
answered between admission cycles on the loop they run on).

    .venv/bin/python -m tests.bench.bench_visibility [--pending 1000 10000 50000] [--repeat 5]

One ClusterQueue (no quota, so everything stays pending) with `--pending` Workloads in 10
LocalQueues; prints the time of one request for the ClusterQueue's first page (Kueue's
default limit 1,000), its last page, a LocalQueue's Workloads, and one admission cycle on
the same state for scale: a request delays the next cycle by at most that long, and adds
nothing to a cycle when no one asks. Figures, not assertions; the pytest function runs a
small size and checks the answer's length.
"""

from __future__ import annotations

import argparse
import statistics
import time

from controller.core.clusterqueues import LocalQueue
from controller.core.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.visibility import pending_in_cluster_queue, pending_in_local_queue
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


def measure(pending: int, repeat: int) -> dict[str, float]:
    state = build(pending)
    return {
        "cq first page": timed(repeat, lambda: pending_in_cluster_queue(state, "cq")),
        "cq last page": timed(
            repeat, lambda: pending_in_cluster_queue(state, "cq", offset=max(0, pending - 1000))
        ),
        "lq all": timed(repeat, lambda: pending_in_local_queue(state, "ns", "lq0", limit=100_000)),
        "one cycle": timed(repeat, lambda: run_cycle(state, 1.0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[1000, 10_000, 50_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(
        f"{'pending':>8}  {'cq first page':>14}  {'cq last page':>13}  {'lq all':>8}  {'one cycle':>10}"
    )
    for pending in args.pending:
        figures = measure(pending, args.repeat)
        print(
            f"{pending:>8}  {figures['cq first page']:>11.1f} ms  {figures['cq last page']:>10.1f} ms"
            f"  {figures['lq all']:>5.1f} ms  {figures['one cycle']:>7.1f} ms",
            flush=True,
        )


def test_visibility_request_cost() -> None:
    figures = measure(2000, 1)
    print(f"\nvisibility request, 2,000 pending: {figures}")
    state = build(2000)
    assert len(pending_in_cluster_queue(state, "cq") or []) == 1000
    assert len(pending_in_local_queue(state, "ns", "lq0") or []) == 200


if __name__ == "__main__":
    main()
