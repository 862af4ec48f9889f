{{/*
A PrometheusRule (monitoring.coreos.com/v1) holding the sidecar's alerts,
when the including chart's values set prometheusRule.enabled. The rules
are written once, in this library's files/alerts.yaml (a plain Prometheus
rule file); docs/alerts.md has a runbook section per alert.

A library's .Files are not the including chart's: a template called with
the parent's context sees the parent's files. The rule file is read through
.Subcharts, which holds this library's own scope, so the library must be a
dependency under its own name (leader-sidecar-lib, no alias).

The rules cover every election Prometheus scrapes, not only this release's:
enable the rule in one release per Prometheus, or each alert fires once per
release.

prometheusRule:
  enabled: false
  labels: {}        # added to the object's own (for a Prometheus that
                    # selects rules by label, such as release: prometheus)
  alerts:           # by alert name, each key optional:
    LeaderSidecarFlapping:
      enabled: true # false leaves the alert out
      for: 0m       # a Prometheus duration
      severity: warning
      threshold: 4  # the number after the expression's one ">", only in
                    # LeaderSidecarFlapping (terms per hour),
                    # LeaderSidecarRenewFailing (failures per 5m),
                    # LeaderSidecarLeaseStale (seconds since the renewal),
                    # LeaderSidecarShardLeaseStale (seconds since the
                    # group's newest shard Lease renewal),
                    # LeaderSidecarShardFlapping (terms per shard per hour)
*/}}
{{- define "leader-sidecar-lib.prometheusRuleSettings" -}}
{{- $p := .Values.prometheusRule | default dict }}
{{- if not (kindIs "map" $p) }}
{{- fail "leader-sidecar-lib: prometheusRule must be a map (enabled, labels, alerts)" }}
{{- end }}
{{- toYaml $p }}
{{- end }}

{{/*
The groups of files/alerts.yaml with the tuning of prometheusRule.alerts
applied, as YAML.
*/}}
{{- define "leader-sidecar-lib.alertGroups" -}}
{{- $p := include "leader-sidecar-lib.prometheusRuleSettings" . | fromYaml }}
{{- $lib := index (.Subcharts | default dict) "leader-sidecar-lib" }}
{{- if not $lib }}
{{- fail "leader-sidecar-lib: prometheusRule needs leader-sidecar-lib as a dependency under its own name (no alias): its rules are read from the library's files/alerts.yaml" }}
{{- end }}
{{- $file := $lib.Files.Get "files/alerts.yaml" | fromYaml }}
{{- $tuning := $p.alerts | default dict }}
{{- $known := dict }}
{{- $thresholds := list "LeaderSidecarFlapping" "LeaderSidecarRenewFailing" "LeaderSidecarLeaseStale" "LeaderSidecarShardFlapping" "LeaderSidecarShardLeaseStale" }}
{{- $groups := list }}
{{- range $g := $file.groups }}
{{- $rules := list }}
{{- range $r := $g.rules }}
{{- $_ := set $known $r.alert true }}
{{- $t := index $tuning $r.alert | default dict }}
{{- if not (eq (toString (index $t "enabled")) "false") }}
{{- with $t.for }}
{{- if not (regexMatch "^([0-9]+(ms|s|m|h|d|w|y))+$" (toString .)) }}
{{- fail (printf "leader-sidecar-lib: prometheusRule.alerts.%s.for must be a Prometheus duration such as 5m, not %v" $r.alert .) }}
{{- end }}
{{- $_ := set $r "for" (toString .) }}
{{- end }}
{{- with $t.severity }}
{{- $_ := set $r.labels "severity" (toString .) }}
{{- end }}
{{- if hasKey $t "threshold" }}
{{- if not (has $r.alert $thresholds) }}
{{- fail (printf "leader-sidecar-lib: prometheusRule.alerts.%s has no threshold to tune (only %s)" $r.alert (join ", " $thresholds)) }}
{{- end }}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" (toString $t.threshold)) }}
{{- fail (printf "leader-sidecar-lib: prometheusRule.alerts.%s.threshold must be a number, not %v" $r.alert $t.threshold) }}
{{- end }}
{{- $_ := set $r "expr" (regexReplaceAll "> [0-9.]+" $r.expr (printf "> %v" $t.threshold)) }}
{{- end }}
{{- $rules = append $rules $r }}
{{- end }}
{{- end }}
{{- if $rules }}
{{- $groups = append $groups (dict "name" $g.name "rules" $rules) }}
{{- end }}
{{- end }}
{{- range $name, $_ := $tuning }}
{{- if not (hasKey $known $name) }}
{{- fail (printf "leader-sidecar-lib: prometheusRule.alerts.%s: no such alert (the alerts are %s)" $name (keys $known | sortAlpha | join ", ")) }}
{{- end }}
{{- end }}
{{- toYaml (dict "groups" $groups) }}
{{- end }}

{{/*
The PrometheusRule (prometheusRule.enabled).
*/}}
{{- define "leader-sidecar-lib.prometheusRule" -}}
{{- $p := include "leader-sidecar-lib.prometheusRuleSettings" . | fromYaml }}
{{- if $p.enabled }}
{{- /* Refused at render time on a cluster without the Prometheus
Operator's API, rather than by the API server at apply time with a generic
"no matches for kind" and a failed revision. */}}
{{- if not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule") }}
{{- fail "leader-sidecar-lib: prometheusRule.enabled needs the Prometheus Operator's API (monitoring.coreos.com/v1, kind PrometheusRule), which the cluster does not serve: install the operator or its CRDs (kube-prometheus-stack), or leave prometheusRule.enabled false; helm template and helm install --dry-run=client know the cluster's API only from --api-versions monitoring.coreos.com/v1/PrometheusRule" }}
{{- end }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
    {{- with $p.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- include "leader-sidecar-lib.alertGroups" . | nindent 2 }}
{{- end }}
{{- end }}
