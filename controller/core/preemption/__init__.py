"""Preemption: who may go, in which order, and which victims a preemptor takes.

- `policy`: which admitted Workloads a preemptor's ClusterQueue policy lets it preempt;
- `preemptibility`: KAI-style preemptibility, resolved per Workload;
- `ordering`: the order victims go in (priority, then preemption cost, …);
- `search`: the minimal set of victims that makes a preemptor fit (KEP-5710);
- `holds`: what a nominated preemptor holds while its victims leave (the state keeps it);
- `minimum_runtime`: candidates a ClusterQueue's minimum runtime still protects;
- `types`: `Contender` and `Victim`, shared by them.

The cycle's side — contenders built from the state, nominations, the oracle flavor
assignment asks whether preemption could make room — is controller/core/scheduler/
(`contenders`, `preemption`); preemption by fair share is controller/core/fairsharing/.
"""
