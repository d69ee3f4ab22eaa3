//go:build tools
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
