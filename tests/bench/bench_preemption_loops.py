"""How often random variants of fair-tree.yaml's tree end in a preemption loop (simulated).

    .venv/bin/python tests/bench/bench_preemption_loops.py [VARIANTS [SEED]]

Draws VARIANTS (default 20) random trees shaped like tools/bench/scenarios/fair-tree.yaml
(an org with 0-8 cpu of its own, three departments of random weight, each with two teams
of a prod and a dev ClusterQueue of random quota and weight, all `reclaimWithinCohort:
Any`, `withinClusterQueue: LowerPriority`) from SEED (default 7), twice: with one to three
workload classes per queue, and with one. Each runs `bench --simulate` with fair sharing
and without, and the table says how many looped (`PreemptionLoop`: the engine preempting
the same Workload over and over while no time passes) and how many preemptions the others
made. These are figures, not assertions (docs/benchmark.md, "Preemption loops"); the
pytest function checks, on two variants, what must hold: every run either ends with every
Workload admitted and no quota over-use, or is stopped by PreemptionLoop.
"""

from __future__ import annotations

import copy
import random
import sys
from dataclasses import dataclass
from typing import Any

from tools.bench.scenario import parse
from tools.bench.simulate import PreemptionLoop, simulate

CLASSES: dict[str, dict[str, Any]] = {
    "small": {"count": 60, "creationIntervalMs": 300, "request": 1, "runtimeMs": 2000, "p": 50},
    "medium": {"count": 15, "creationIntervalMs": 1000, "request": 4, "runtimeMs": 2000, "p": 100},
    "large": {"count": 4, "creationIntervalMs": 4000, "request": 8, "runtimeMs": 4000, "p": 200},
}


def _workloads(name: str) -> dict[str, Any]:
    spec = CLASSES[name]
    workload = {
        "className": name,
        "runtimeMs": spec["runtimeMs"],
        "priority": spec["p"],
        "request": spec["request"],
    }
    return {
        "count": spec["count"],
        "creationIntervalMs": spec["creationIntervalMs"],
        "workloads": [workload],
    }


def variant(rng: random.Random, several_classes: bool) -> dict[str, Any]:
    """A scenario document: fair-tree's shape with random quotas, weights and loads."""
    parents: list[dict[str, Any]] = [{"name": "org", "nominalQuota": rng.randint(0, 8)}]
    cohorts = []
    for department in ("eng", "product", "research"):
        parents.append({"name": department, "parent": "org", "weight": rng.choice([1, 2, 3])})
        queues = []
        for name, nominal in (("prod", rng.randint(2, 8)), ("dev", rng.randint(0, 4))):
            classes = rng.sample(list(CLASSES), rng.randint(1, 3) if several_classes else 1)
            queues.append(
                {
                    "className": name,
                    "count": 1,
                    "nominalQuota": nominal,
                    "weight": rng.choice([1, 2]),
                    "reclaimWithinCohort": "Any",
                    "withinClusterQueue": "LowerPriority",
                    "workloadsSets": [copy.deepcopy(_workloads(c)) for c in classes],
                }
            )
        team = {"className": f"{department}-team", "count": 2, "parent": department}
        cohorts.append({**team, "queuesSets": queues})
    return {"parentCohorts": parents, "cohorts": cohorts}


@dataclass
class Tally:
    runs: int = 0
    loops: int = 0
    preemptions: int = 0  # in the runs that ended

    def __str__(self) -> str:
        return f"{self.loops} of {self.runs} looped ({self.preemptions:,} preemptions in the rest)"


def tally(variants: int, seed: int, several_classes: bool) -> dict[bool, Tally]:
    """Per fair sharing on (True) / off (False): loops and preemptions over the variants."""
    rng = random.Random(seed)
    out = {True: Tally(), False: Tally()}
    for index in range(variants):
        doc = variant(rng, several_classes)
        for fair in (True, False):
            scenario = parse({**doc, "fairSharing": {}} if fair else doc, f"variant-{index}")
            out[fair].runs += 1
            try:
                report = simulate(scenario)
            except PreemptionLoop:
                out[fair].loops += 1
                continue
            assert report.overuse_events == 0, f"variant {index}: quota over-use"
            assert all(c.admitted == c.count for c in report.classes.values()), index
            out[fair].preemptions += report.preemptions
    return out


def test_every_variant_ends_or_is_stopped_as_a_loop() -> None:
    for several in (True, False):
        results = tally(1, 7, several)
        assert all(t.runs == 1 for t in results.values())


def main(argv: list[str]) -> None:
    variants = int(argv[0]) if argv else 20
    seed = int(argv[1]) if len(argv) > 1 else 7
    print(f"{variants} random variants of fair-tree.yaml's tree, seed {seed}")
    for several in (True, False):
        label = "one to three classes per queue" if several else "one class per queue"
        results = tally(variants, seed, several)
        print(f"  {label}:")
        print(f"    fair sharing:    {results[True]}")
        print(f"    without:         {results[False]}")


if __name__ == "__main__":
    main(sys.argv[1:])
