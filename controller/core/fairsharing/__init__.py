"""Kueue's fair sharing (KEP-1714): the settings, dominant resource shares, the
tournament that orders a cycle's heads, and preemption by share."""
