"""The live run's quota ledger: reserved quota per ClusterQueue, cohort and class, replayed
in the Workload watch's (etcd) order. It integrates reserved quota over time and counts
over-use: after an admission, a ClusterQueue above nominal + borrowingLimit or a cohort
tree above its total nominal quota."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from tools.bench.report import Job

__all__ = ["Ledger"]

log = logging.getLogger(__name__)


@dataclass
class Ledger:
    """Reserved quota per ClusterQueue and cohort tree, replayed in watch order."""

    limits: dict[str, int | None]  # per ClusterQueue: nominal + borrowingLimit, or no limit
    capacity: dict[str, int]  # per cohort tree (by its root): its total nominal quota
    per_queue: dict[str, int] = field(default_factory=dict)
    per_cohort: dict[str, int] = field(default_factory=dict)
    per_class: dict[str, int] = field(default_factory=dict)
    reserved: int = 0
    integral: float = 0.0
    last_t: float = 0.0
    overuse: int = 0

    def advance(self, t: float) -> None:
        if t > self.last_t:
            self.integral += self.reserved * (t - self.last_t)
            self.last_t = t

    def charge(self, job: Job, sign: int, t: float) -> None:
        """`job`'s request reserved (`sign` 1) or released (-1) at `t`."""
        self.advance(t)
        amount = sign * job.request
        self.reserved += amount
        q = self.per_queue[job.cluster_queue] = self.per_queue.get(job.cluster_queue, 0) + amount
        c = self.per_cohort[job.root_cohort] = self.per_cohort.get(job.root_cohort, 0) + amount
        self.per_class[job.class_name] = self.per_class.get(job.class_name, 0) + amount
        limit = self.limits[job.cluster_queue]
        if sign > 0 and (c > self.capacity[job.root_cohort] or (limit is not None and q > limit)):
            self.overuse += 1
            log.error(
                "quota over-use: %s admitted with %s at %.0fm in its queue, %.0fm in cohort tree %s",
                job.key,
                job.cluster_queue,
                q,
                c,
                job.root_cohort,
            )
