"""Kueue's admission fair sharing: LocalQueues ordered by their recent usage within a
ClusterQueue (the settings and arithmetic, the usage ledger, the queue, the sampling)."""
