"""Topology-aware scheduling (Kueue's TAS), pure: the node view of a TAS flavor
(`snapshot.py`), where a pod set's pods go in it (`assignment.py`) and the assignment in
v1beta2's compressed form (`encoding.py`)."""
