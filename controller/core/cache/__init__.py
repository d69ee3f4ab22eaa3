"""What holds quota (Kueue's `pkg/cache/scheduler` and `pkg/cache/hierarchy`): the object
stores, one record per Workload, the reserved usage through the tree of Cohorts, and the
index the status writers read."""
