"""`quotagate bench --live`: the scenario against a running API server and whatever
Kueue-compatible controller runs there (quotagate, or Kueue itself).

Only the Kueue v1beta2 API is used, as Kueue's own performance runner does:

1. Setup (`cluster.py`): ResourceFlavor, per ClusterQueue a Namespace, the ClusterQueue
   and a LocalQueue, as Kueue's generator makes them; then wait until the controller
   reports every ClusterQueue Active.
2. Creation (`run.py`): bare Workloads (one pod, `spec.priority`, a cpu request) on
   Kueue's generator schedule, written in parallel.
3. The job side (`job_side.py`), as Kueue's scheduler-perf runner writes it: Finished by
   condition apply after the runtime; evictions acknowledged by clearing the reservation
   as Kueue's job side does, so the Workload competes again.
4. Recording (`run.py`, `tools/bench/recorder.py`), from two watches as Kueue's
   runner records: every ClusterQueue event (ClusterQueue usage) and every Workload event
   (time to admission, evictions), each with the time it was observed. The ClusterQueue
   watch goes on after the last Workload finished until no active ClusterQueue reports
   pending or reserving Workloads. Quota over-use is checked by replaying the
   reservations in the watch's (etcd) order (`ledger.py`).
5. Cleanup (unless `keep`): every object of the run, found by the run's label.

`staging.py` holds what other live runs (`floor.py`) share: the stages, the resumable
watch, process CPU.
"""

from tools.bench.live.cluster import FIELD_MANAGER, RUN_LABEL, RUNTIME_LABEL, workload_body
from tools.bench.live.run import LiveRun, run_live
from tools.bench.live.staging import LiveError, Staged, follow, process_cpu, staged

__all__ = [
    "FIELD_MANAGER",
    "RUNTIME_LABEL",
    "RUN_LABEL",
    "LiveError",
    "LiveRun",
    "Staged",
    "follow",
    "process_cpu",
    "run_live",
    "staged",
    "workload_body",
]
