"""quotagate's API: pydantic models of the Kueue `kueue.x-k8s.io/v1beta2` kinds it serves
(plus quotagate's additive fields), the shared constants, and CRD generation (`api.crdgen`).
"""

from api.clusterqueue import ClusterQueue
from api.cohort import Cohort
from api.localqueue import LocalQueue
from api.objects import InvalidObjectError, KueueObject
from api.registry import MODELS, load_object
from api.resourceflavor import ResourceFlavor
from api.workload import Workload
from api.workloadpriorityclass import WorkloadPriorityClass

__all__ = [
    "MODELS",
    "ClusterQueue",
    "Cohort",
    "InvalidObjectError",
    "KueueObject",
    "LocalQueue",
    "ResourceFlavor",
    "Workload",
    "WorkloadPriorityClass",
    "load_object",
]
