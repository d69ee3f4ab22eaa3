{{- define "quotagate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "quotagate.labels" -}}
app.kubernetes.io/name: quotagate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "quotagate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* How the webhook's certificate is provided: internal (default), certManager, existingSecret. */}}
{{- define "quotagate.certMode" -}}
{{- if .Values.webhook.certManager.enabled -}}certManager{{- else if .Values.webhook.existingSecret -}}existingSecret{{- else -}}internal{{- end -}}
{{- end -}}

{{- define "quotagate.certDir" -}}
{{- if eq (include "quotagate.certMode" .) "internal" -}}/var/run/quotagate/webhook-certs{{- else -}}/etc/quotagate/webhook{{- end -}}
{{- end -}}

{{- define "quotagate.webhookSecret" -}}
{{ .Values.webhook.existingSecret | default (printf "%s-webhook-cert" (include "quotagate.fullname" .)) }}
{{- end -}}

{{/* The kubelet's probes of a container serving /healthz and /readyz on `port`. */}}
{{- define "quotagate.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: health}
  initialDelaySeconds: 10
  periodSeconds: 20
readinessProbe:
  httpGet: {path: /readyz, port: health}
  initialDelaySeconds: 2
  periodSeconds: 5
{{- end -}}

{{/* The enabled integrations as JSON, by name: controller.config.integrations.frameworks
(Kueue's default, batch/job, when empty) and the names they imply, each with its RBAC rules
and webhook rule from files/integrations.yaml (generated from quotagate's registry). A name
quotagate does not implement fails the render, as it fails `quotagate run`. */}}
{{- define "quotagate.integrations" -}}
{{- $known := .Files.Get "files/integrations.yaml" | fromYaml -}}
{{- $integrations := .Values.controller.config.integrations | default dict -}}
{{- $pending := $integrations.frameworks | default (list "batch/job") -}}
{{- $names := list -}}
{{- range $name := $pending -}}
{{- if not (hasKey $known $name) -}}
{{- fail (printf "controller.config.integrations.frameworks: %s is not an integration quotagate implements (implemented: %s)" $name (keys $known | sortAlpha | join ", ")) -}}
{{- end -}}
{{- $names = append $names $name -}}
{{- range $implied := (get $known $name).implies -}}{{- $names = append $names $implied -}}{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $name := ($names | uniq) -}}{{- $_ := set $out $name (get $known $name) -}}{{- end -}}
{{- toJson $out -}}
{{- end -}}
