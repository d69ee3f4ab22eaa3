"""The pending Workloads (Kueue's `pkg/cache/queue`): one queue per ClusterQueue, the
requeue backoff, the retries of parked Workloads, and why a Workload is pending."""
