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

{{/* Kueue's Configuration file (controller.kueueConfiguration, verbatim) as a dict; empty
when quotagate's own format (controller.config) is used. */}}
{{- define "quotagate.kueueConfig" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- toJson (.Values.controller.kueueConfiguration | fromYaml) -}}{{- else -}}{}{{- end -}}
{{- end -}}

{{/* The configuration the controller reads: the Kueue file, else controller.config. */}}
{{- define "quotagate.config" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- include "quotagate.kueueConfig" . -}}{{- else -}}{{- toJson .Values.controller.config -}}{{- end -}}
{{- end -}}

{{/* A port from a Kueue bind address (":8443"; "0" = off). */}}
{{- define "quotagate.bindPort" -}}
{{- $address := toString . -}}{{- if or (eq $address "0") (eq $address "") -}}0{{- else -}}{{- splitList ":" $address | last -}}{{- end -}}
{{- end -}}

{{/* The metrics and health ports: from the Kueue file (Kueue's defaults :8443, :8081),
else the chart's values. */}}
{{- define "quotagate.metricsPort" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- $k := include "quotagate.kueueConfig" . | fromJson -}}{{- include "quotagate.bindPort" (dig "metrics" "bindAddress" ":8443" $k) -}}{{- else -}}{{ .Values.controller.config.metricsPort }}{{- end -}}
{{- end -}}
{{- define "quotagate.healthPort" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- $k := include "quotagate.kueueConfig" . | fromJson -}}{{- include "quotagate.bindPort" (dig "health" "healthProbeBindAddress" ":8081" $k) -}}{{- else -}}{{ .Values.controller.healthPort }}{{- end -}}
{{- end -}}
{{- define "quotagate.webhookPort" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- $k := include "quotagate.kueueConfig" . | fromJson -}}{{- dig "webhook" "port" 9443 $k -}}{{- else -}}{{ .Values.webhook.port }}{{- end -}}
{{- end -}}

{{/* The visibility API's port: a Kueue Configuration's visibilityServer.bindPort (Kueue's
default 8082), else visibility.port. */}}
{{- define "quotagate.visibilityPort" -}}
{{- if .Values.controller.kueueConfiguration -}}{{- $k := include "quotagate.kueueConfig" . | fromJson -}}{{- dig "visibilityServer" "bindPort" 8082 $k -}}{{- else -}}{{ .Values.visibility.port }}{{- end -}}
{{- end -}}

{{/* The enabled integrations as JSON, by name: the configuration's integrations.frameworks
(Kueue's default, batch/job, when empty) and the names they imply, each with its RBAC rules
and webhook rule from files/integrations.yaml (generated from quotagate's registry). A name
quotagate does not implement is left out: `quotagate run` lists it as not implemented. */}}
{{- define "quotagate.integrations" -}}
{{- $known := .Files.Get "files/integrations.yaml" | fromYaml -}}
{{- $config := include "quotagate.config" . | fromJson -}}
{{- $integrations := $config.integrations | default dict -}}
{{- $pending := $integrations.frameworks | default (list "batch/job") -}}
{{- $names := list -}}
{{- range $name := $pending -}}
{{- if hasKey $known $name -}}
{{- $names = append $names $name -}}
{{- range $implied := (get $known $name).implies -}}{{- $names = append $names $implied -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $name := ($names | uniq) -}}{{- $_ := set $out $name (get $known $name) -}}{{- end -}}
{{- toJson $out -}}
{{- end -}}
