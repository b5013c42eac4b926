{{/* Names, labels and the checks of impossible values. */}}

{{- define "devlet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "devlet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "devlet.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "devlet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "devlet.labels" -}}
helm.sh/chart: {{ include "devlet.chart" . }}
app.kubernetes.io/name: {{ include "devlet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "devlet.nodeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "devlet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "devlet.extenderSelectorLabels" -}}
app.kubernetes.io/name: {{ include "devlet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler-extender
{{- end -}}

{{- define "devlet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "devlet.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "devlet.extenderName" -}}
{{- printf "%s-extender" (include "devlet.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "devlet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The DeviceClass name of one kind: .name, else <prefix>.<driverName>. */}}
{{- define "devlet.deviceClassName" -}}
{{- $class := index .root.Values.deviceClasses .kind -}}
{{- default (printf "%s.%s" .prefix .root.Values.driverName) $class.name -}}
{{- end -}}

{{/* "A=true,B=false" from a map, sorted (the --feature-gates syntax). */}}
{{- define "devlet.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := . -}}
{{- $gates = append $gates (printf "%s=%t" $name $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* Env vars that point a client at the API server directly (apiServer.host/port). */}}
{{- define "devlet.apiServerEnv" -}}
{{- if .Values.apiServer.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ required "apiServer.port is required when apiServer.host is set" .Values.apiServer.port | toString | quote }}
{{- end }}
{{- end -}}

{{/*
Impossible values, refused with a message that names the value (included by every template, so
that `helm template` with any -s fails too). values.schema.json checks the types.
*/}}
{{- define "devlet.validate" -}}
{{- $driver := .Values.driverName | default "" | toString -}}
{{- if not $driver -}}
{{- fail "driverName is required: the DRA driver name, a DNS subdomain such as devlet.io" -}}
{{- end -}}
{{- if or (gt (len $driver) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $driver)) -}}
{{- fail (printf "driverName %q is not a DNS subdomain of at most 63 characters (lower-case letters, digits, '-' and '.'), e.g. devlet.io" $driver) -}}
{{- end -}}
{{- if not (has .Values.extender.mode (list "score" "allocate")) -}}
{{- fail (printf "extender.mode %q does not exist: use score (kube-scheduler's DynamicResources allocates, the extender scores) or allocate (the extender allocates and binds)" (toString .Values.extender.mode)) -}}
{{- end -}}
{{- if not (has .Values.extender.policy (list "binpack" "spread")) -}}
{{- fail (printf "extender.policy %q does not exist: use binpack or spread" (toString .Values.extender.policy)) -}}
{{- end -}}
{{- if not (has .Values.loggingFormat (list "text" "json")) -}}
{{- fail (printf "loggingFormat %q does not exist: use text or json" (toString .Values.loggingFormat)) -}}
{{- end -}}
{{- if not (has .Values.nri.cdiPolicy (list "auto" "names" "edits" "none")) -}}
{{- fail (printf "nri.cdiPolicy %q does not exist: use auto, names, edits or none" (toString .Values.nri.cdiPolicy)) -}}
{{- end -}}
{{- if and .Values.extender.enabled .Values.extender.tls.enabled (not .Values.extender.tls.secretName) -}}
{{- fail "extender.tls.enabled needs extender.tls.secretName: a Secret with tls.crt, tls.key and ca.crt" -}}
{{- end -}}
{{- if and .Values.apiServer.port (not .Values.apiServer.host) -}}
{{- fail "apiServer.port is set without apiServer.host: set both to reach the API server directly, or neither" -}}
{{- end -}}
{{- end -}}
