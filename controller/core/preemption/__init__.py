"""Preemption: who may go, in which order, and which victims a preemptor takes.

- `policy`: which admitted Workloads a preemptor's ClusterQueue policy lets it preempt;
- `preemptibility`: KAI-style preemptibility, resolved per Workload;
- `ordering`: the order victims go in (priority, then preemption cost, …);
- `search`: the minimal set of victims that makes a preemptor fit (KEP-5710);
- `nominations`: the cycle's side — candidates from the state, nominated preemptors,
  and the oracle flavor assignment asks whether preemption could make room;
- `types`: `Contender` and `Victim`, shared by them.
"""
