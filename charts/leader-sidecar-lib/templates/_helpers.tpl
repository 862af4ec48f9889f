{{/*
Names and labels, following the conventions of `helm create`. They are
computed from the chart that includes this library (.Chart is that chart),
so a chart that uses leader-sidecar-lib for its names gets the same ones its
own _helpers.tpl would give.
*/}}

{{/*
Expand the name of the chart.
*/}}
{{- define "leader-sidecar-lib.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name. Truncated at 63 characters
because some Kubernetes name fields are limited to this (by the DNS naming
spec). If the release name contains the chart name it is used as the full
name.
*/}}
{{- define "leader-sidecar-lib.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "leader-sidecar-lib.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "leader-sidecar-lib.labels" -}}
helm.sh/chart: {{ include "leader-sidecar-lib.chart" . }}
{{ include "leader-sidecar-lib.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels. They never include the role label of readiness mode
`label`: the sidecar changes that one on the running Pod.
*/}}
{{- define "leader-sidecar-lib.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leader-sidecar-lib.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The name of the ServiceAccount the Pod runs as.
*/}}
{{- define "leader-sidecar-lib.serviceAccountName" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if $c.serviceAccount.create }}
{{- default (include "leader-sidecar-lib.fullname" .) $c.serviceAccount.name }}
{{- else }}
{{- default "default" $c.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The name of the election: the Lease (lease backend) or the SQLite row.
Defaults to the full name of the release, so two releases never contend.
*/}}
{{- define "leader-sidecar-lib.leaseName" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- default (include "leader-sidecar-lib.fullname" .) $c.leaseName | trunc 63 | trimSuffix "-" }}
{{- end }}
