"""`kubectl quotagate`: inspect queues and Workloads on a live cluster, and ask "what if".

The plugin reads live objects with the synchronous kubernetes client (`cluster.py`),
turns them into the engine's objects and asks `controller.core` (through
`controller.core.plan.plan`) the same questions the controller answers, so its
answers never drift from the controller's rules. Printing is pure (`printing.py`).
"""
