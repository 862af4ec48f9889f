{{/*
A ConfigMap holding the Grafana dashboard of this library's
files/dashboard.json (leader per election over time, token, terms and gaps,
renewals and the store, app health), when the including chart's values set
grafanaDashboard.enabled. kube-prometheus-stack's Grafana sidecar loads
every ConfigMap labelled grafana_dashboard: "1" (its
sidecar.dashboards.label and labelValue); labels replaces or adds to that
label, annotations are added (such as grafana_folder for the sidecar's
folderAnnotation).

The dashboard shows every election its data source holds, chosen by its
namespace and lease variables: enable it in one release per Grafana (two
ConfigMaps with one dashboard uid make Grafana keep only one). As for the
PrometheusRule, the file is read through .Subcharts, so the library must be
a dependency under its own name.

Usage:
  {{ include "leader-sidecar-lib.grafanaDashboard" . }}

grafanaDashboard:
  enabled: false
  labels:
    grafana_dashboard: "1"
  annotations: {}
*/}}
{{- define "leader-sidecar-lib.grafanaDashboard" -}}
{{- $d := .Values.grafanaDashboard | default dict }}
{{- if not (kindIs "map" $d) }}
{{- fail "leader-sidecar-lib: grafanaDashboard must be a map (enabled, labels, annotations)" }}
{{- end }}
{{- if $d.enabled }}
{{- $lib := index (.Subcharts | default dict) "leader-sidecar-lib" }}
{{- if not $lib }}
{{- fail "leader-sidecar-lib: grafanaDashboard needs leader-sidecar-lib as a dependency under its own name (no alias): the dashboard is read from the library's files/dashboard.json" }}
{{- end }}
{{- $labels := hasKey $d "labels" | ternary $d.labels (dict "grafana_dashboard" "1") }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-dashboard" (include "leader-sidecar-lib.fullname" . | trunc 53 | trimSuffix "-") }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
    {{- with $labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $d.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  leader-sidecar.json: |-
    {{- $lib.Files.Get "files/dashboard.json" | trimSuffix "\n" | nindent 4 }}
{{- end }}
{{- end }}
