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
The ServiceAccount the Pod runs as, as YAML: name ("" when nothing names
one: the Pod then runs as the namespace's default), create (the library
renders it) and chartOwned. A chart with a top-level `serviceAccount:` in
its values (as `helm create` makes) owns its ServiceAccount and the library
follows that chart's convention; sidecar.serviceAccount.name always wins and
sidecar.serviceAccount.create true or false overrides the choice.
*/}}
{{- define "leader-sidecar-lib.serviceAccountChoice" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $own := .Values.serviceAccount }}
{{- $chartOwned := kindIs "map" $own }}
{{- $create := not $chartOwned }}
{{- if not (kindIs "invalid" $c.serviceAccount.create) }}
{{- $create = $c.serviceAccount.create }}
{{- end }}
{{- $name := $c.serviceAccount.name | default "" }}
{{- if and (not $name) $create }}
{{- $name = include "leader-sidecar-lib.fullname" . }}
{{- else if and (not $name) $chartOwned }}
{{- if $own.create }}
{{- $name = default (include "leader-sidecar-lib.fullname" .) $own.name }}
{{- else }}
{{- $name = $own.name | default "" }}
{{- end }}
{{- end }}
{{- toYaml (dict "name" $name "create" $create "chartOwned" $chartOwned) }}
{{- end }}

{{/*
The name of the ServiceAccount the Pod runs as: "default" when nothing
names one (the Role is then never bound, see leader-sidecar-lib.roleBinding).
*/}}
{{- define "leader-sidecar-lib.serviceAccountName" -}}
{{- (include "leader-sidecar-lib.serviceAccountChoice" . | fromYaml).name | default "default" }}
{{- end }}

{{/*
The name of the election: the Lease (lease backend) or the SQLite row.
Defaults to the full name of the release, so two releases never contend.
*/}}
{{- define "leader-sidecar-lib.leaseName" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- default (include "leader-sidecar-lib.fullname" .) $c.leaseName | trunc 63 | trimSuffix "-" }}
{{- end }}
