{{/*
Prometheus Operator objects (monitoring.coreos.com/v1) that scrape the
sidecars' metrics, /metrics on the ops port, from every replica, leader or
not. Off unless the including chart's values enable one:

- serviceMonitor.enabled: a headless Service <fullname>-metrics on the ops
  port that lists every replica, ready or not (under leader-only readiness
  the standbys are never Ready, and their metrics matter too), and a
  ServiceMonitor that selects it;
- podMonitor.enabled: a PodMonitor that selects the Pods directly (no
  Service).

Enable one of the two, not both: they would scrape every Pod twice. Each
takes interval and scrapeTimeout (Prometheus durations such as 30s) and
labels, added to the monitor's own (for a Prometheus that selects monitors
by label, such as release: prometheus).
*/}}
{{- define "leader-sidecar-lib.monitoringSettings" -}}
{{- $out := dict }}
{{- range $kind := list "serviceMonitor" "podMonitor" }}
{{- $m := index $.Values $kind | default dict }}
{{- if not (kindIs "map" $m) }}
{{- fail (printf "leader-sidecar-lib: %s must be a map (enabled, interval, scrapeTimeout, labels)" $kind) }}
{{- end }}
{{- range $key := list "interval" "scrapeTimeout" }}
{{- $v := index $m $key }}
{{- if and $v (not (regexMatch "^([0-9]+(ms|s|m|h))+$" (toString $v))) }}
{{- fail (printf "leader-sidecar-lib: %s.%s must be a Prometheus duration such as 30s, not %v" $kind $key $v) }}
{{- end }}
{{- end }}
{{- $_ := set $out $kind $m }}
{{- end }}
{{- if and $out.serviceMonitor.enabled $out.podMonitor.enabled }}
{{- fail "leader-sidecar-lib: serviceMonitor.enabled and podMonitor.enabled are both true: enable one, or every Pod is scraped twice" }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The scrape endpoint of a monitor's settings (.) on the sidecar's ops port.
*/}}
{{- define "leader-sidecar-lib.scrapeEndpoint" -}}
- port: ops
  path: /metrics
  {{- with .interval }}
  interval: {{ . }}
  {{- end }}
  {{- with .scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
{{- end }}

{{/*
The metrics Service and its ServiceMonitor (serviceMonitor.enabled), as a
multi-document stream.
*/}}
{{- define "leader-sidecar-lib.serviceMonitor" -}}
{{- $m := (include "leader-sidecar-lib.monitoringSettings" . | fromYaml).serviceMonitor }}
{{- if $m.enabled }}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $name := printf "%s-metrics" (include "leader-sidecar-lib.fullname" . | trunc 55 | trimSuffix "-") }}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
    app.kubernetes.io/component: leader-sidecar-metrics
spec:
  # Headless, and every replica listed ready or not: Prometheus scrapes
  # each sidecar, standbys included.
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "leader-sidecar-lib.selectorLabels" . | nindent 4 }}
  ports:
    - name: ops
      port: {{ $c.opsPort }}
      targetPort: ops
      protocol: TCP
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "leader-sidecar-lib.selectorLabels" . | nindent 6 }}
      app.kubernetes.io/component: leader-sidecar-metrics
  endpoints:
    {{- include "leader-sidecar-lib.scrapeEndpoint" $m | nindent 4 }}
{{- end }}
{{- end }}

{{/*
The PodMonitor (podMonitor.enabled).
*/}}
{{- define "leader-sidecar-lib.podMonitor" -}}
{{- $m := (include "leader-sidecar-lib.monitoringSettings" . | fromYaml).podMonitor }}
{{- if $m.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "leader-sidecar-lib.selectorLabels" . | nindent 6 }}
  podMetricsEndpoints:
    {{- include "leader-sidecar-lib.scrapeEndpoint" $m | nindent 4 }}
{{- end }}
{{- end }}

{{/*
The optional objects as one multi-document stream: the PodDisruptionBudget,
the metrics Service and ServiceMonitor, the PodMonitor, the PrometheusRule
(_prometheusrule.tpl), the Grafana dashboard's ConfigMap (_dashboard.tpl);
each only when its
values enable it. Put `{{ include "leader-sidecar-lib.extras" . }}` alone in
a template file.
*/}}
{{- define "leader-sidecar-lib.extras" -}}
{{- range $t := list "podDisruptionBudget" "serviceMonitor" "podMonitor" "prometheusRule" "grafanaDashboard" }}
{{- with include (printf "leader-sidecar-lib.%s" $t) $ }}
---
{{ . }}
{{- end }}
{{- end }}
{{- end }}
