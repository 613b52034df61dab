{{/* The pool's name, and the base of every object's name. */}}
{{- define "iris.pool" -}}
{{- default .Release.Name .Values.inferencePool.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "iris.epp" -}}
{{- printf "%s-epp" (include "iris.pool" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "iris.labels" -}}
app.kubernetes.io/part-of: iris
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selects the model servers: the pool, its Service and the Deployment use these. */}}
{{- define "iris.serverSelector" -}}
app.kubernetes.io/name: iris
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "iris.eppSelector" -}}
app.kubernetes.io/name: iris-epp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* A gauge's name, with the model's label when epp.model names one. */}}
{{- define "iris.metric" -}}
{{- if .root.Values.epp.model -}}
{{ .name }}{model="{{ .root.Values.epp.model }}"}
{{- else -}}
{{ .name }}
{{- end -}}
{{- end -}}
