{{/* Names and labels shared by every template. */}}
{{- define "worldserve.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "worldserve.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "worldserve.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "worldserve.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "worldserve.secretName" -}}{{ include "worldserve.fullname" . }}-secrets{{- end -}}
{{- define "worldserve.configName" -}}{{ include "worldserve.fullname" . }}-config{{- end -}}

{{/* Environment every worldserve process gets: the config map and the secrets. */}}
{{- define "worldserve.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "worldserve.configName" . }}
env:
  - name: WORLDSERVE_REDIS_URL
    valueFrom: {secretKeyRef: {name: {{ include "worldserve.secretName" . }}, key: REDIS_URL}}
  - name: WORLDSERVE_DATABASE_URL
    valueFrom: {secretKeyRef: {name: {{ .Values.postgresql.existingSecret | default (include "worldserve.secretName" .) }}, key: DATABASE_URL}}
  - name: WORLDSERVE_ADMIN_API_KEY
    valueFrom: {secretKeyRef: {name: {{ include "worldserve.secretName" . }}, key: ADMIN_API_KEY}}
{{- end -}}

{{/* Pod-level settings shared by the project's pods: non-root, config checksum. */}}
{{- define "worldserve.podAnnotations" -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- end -}}
