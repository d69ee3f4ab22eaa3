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
