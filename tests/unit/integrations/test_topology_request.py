"""A pod template's topology annotations as the Workload's `topologyRequest` (Kueue's
`podSetTopologyRequestBuilder.Build`): the multi-layer slice annotation."""

from __future__ import annotations

from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.framework.workloads import topology_request

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"


def test_the_layers_annotation_becomes_the_constraints_and_wins_over_one_layer() -> None:
    annotations = {
        REQUIRED: "block",
        LAYERS: '[{"topology": "rack", "size": 4}, {"topology": "host", "size": 2}]',
        SLICE: "rack",
        SIZE: "8",
    }
    assert topology_request(annotations, TopologyHints()) == {
        "required": "block",
        "podsetSliceRequiredTopologyConstraints": [
            {"topology": "rack", "size": 4},
            {"topology": "host", "size": 2},
        ],
    }


def test_a_malformed_layers_annotation_is_not_read() -> None:
    for text in ("not json", "[]", '[{"topology": "a", "size": "2"}]', "[1, 2, 3, 4]"):
        assert topology_request({REQUIRED: "block", LAYERS: text}, TopologyHints()) == {
            "required": "block"
        }
