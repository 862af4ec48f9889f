{{/*
A PodDisruptionBudget for the release's Pods, when the including chart's
values have podDisruptionBudget.enabled: true. Give minAvailable or
maxUnavailable (a number or a percentage), not both; neither means
maxUnavailable: 1, so a node drain evicts one replica at a time and the
others stay to take over the election.

Under leader-only readiness (readiness mode probe or pod-condition, or
waitForLeadership) only the leader's Pod counts as healthy, so a budget
that keeps one Pod available can never evict the leader: a drain waits
until the leader is deleted some other way. Use maxUnavailable there, or
readiness mode label.
*/}}
{{- define "leader-sidecar-lib.podDisruptionBudget" -}}
{{- $p := .Values.podDisruptionBudget | default dict }}
{{- if not (kindIs "map" $p) }}
{{- fail "leader-sidecar-lib: podDisruptionBudget must be a map (enabled, minAvailable, maxUnavailable)" }}
{{- end }}
{{- if $p.enabled }}
{{- $min := $p.minAvailable }}
{{- $max := $p.maxUnavailable }}
{{- $hasMin := not (or (kindIs "invalid" $min) (eq (toString $min) "")) }}
{{- $hasMax := not (or (kindIs "invalid" $max) (eq (toString $max) "")) }}
{{- if and $hasMin $hasMax }}
{{- fail (printf "leader-sidecar-lib: podDisruptionBudget.minAvailable (%v) and podDisruptionBudget.maxUnavailable (%v) are both set: give one of them" $min $max) }}
{{- end }}
{{- range $key, $v := dict "minAvailable" $min "maxUnavailable" $max }}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") (not (regexMatch "^([0-9]+|[0-9]+%)$" (toString $v))) }}
{{- fail (printf "leader-sidecar-lib: podDisruptionBudget.%s must be a number of Pods or a percentage such as 50%%, not %v" $key $v) }}
{{- end }}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
spec:
  {{- if $hasMin }}
  minAvailable: {{ $min | toYaml }}
  {{- else }}
  maxUnavailable: {{ ternary $max 1 $hasMax | toYaml }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "leader-sidecar-lib.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}
