{{/* The name of every object: the release's, with the chart's unless it already holds it. */}}
{{- define "jethook.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jethook.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jethook.labels" -}}
{{ include "jethook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The embedded store: no external NATS. */}}
{{- define "jethook.embedded" -}}
{{- if not .Values.nats.url }}true{{ end -}}
{{- end -}}

{{/* Each pod claims its data volume: a StatefulSet's volumeClaimTemplate. */}}
{{- define "jethook.claimPerPod" -}}
{{- if and (eq .Values.kind "StatefulSet") .Values.persistence.enabled }}true{{ end -}}
{{- end -}}

{{/* What cannot run, refused with the reason. */}}
{{- define "jethook.refusals" -}}
{{- if and (include "jethook.embedded" .) (gt (int .Values.replicaCount) 1) }}
{{- fail "replicaCount: the embedded store belongs to one process; set nats.url to run more than one replica" }}
{{- end }}
{{- if and .Values.metrics.enabled (not .Values.adminToken.secretName) }}
{{- fail "metrics.enabled: the admin listener leaves loopback and needs a token; set adminToken.secretName" }}
{{- end }}
{{- if eq (int .Values.metrics.port) 8080 }}
{{- fail "metrics.port: 8080 is the webhooks port; pick another for the admin listener" }}
{{- end }}
{{- if and (include "jethook.claimPerPod" .) .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim: a StatefulSet claims a volume per pod from its volumeClaimTemplate; use kind: Deployment to mount an existing claim" }}
{{- end }}
{{- end -}}
