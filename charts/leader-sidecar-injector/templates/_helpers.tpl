{{/*
The names every object of the chart shares: the policies, their bindings
and the parameter ConfigMap (also the name of a namespace's own).
*/}}
{{- define "leader-sidecar-injector.name" -}}leader-sidecar-injector{{- end }}

{{- define "leader-sidecar-injector.labels" -}}
app.kubernetes.io/name: leader-sidecar-injector
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
The sidecar's image reference: repository@digest, else repository:tag.
*/}}
{{- define "leader-sidecar-injector.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}
{{- end }}

{{/*
The settings a Pod annotation overrides, as a YAML list: the CEL variable,
the annotation (after leader-sidecar.io/) and the parameter's key (also
the key under .Values.defaults, and under definitions.settings in the
schema, which says what values it takes); with "when", the variable that
must not be empty for the setting to reach the sidecar.
*/}}
{{- define "leader-sidecar-injector.settings" -}}
- {var: backend, annotation: backend, key: backend}
- {var: mode, annotation: readiness, key: readinessMode}
- {var: wait, annotation: wait-for-leadership, key: waitForLeadership}
- {var: leaseDuration, annotation: lease-duration, key: leaseDuration}
- {var: renewDeadline, annotation: renew-deadline, key: renewDeadline}
- {var: retryPeriod, annotation: retry-period, key: retryPeriod}
- {var: renewInterval, annotation: renew-interval, key: renewInterval}
- {var: maxRecordLeaseDuration, annotation: max-record-lease-duration, key: maxRecordLeaseDuration}
- {var: awaitReplacement, annotation: await-replacement, key: awaitReplacement}
- {var: appHealthPeriod, annotation: app-health-period, key: appHealthPeriod, when: appHealthURL}
- {var: appHealthFailures, annotation: app-health-failures, key: appHealthFailures, when: appHealthURL}
- {var: appHealthTimeout, annotation: app-health-timeout, key: appHealthTimeout, when: appHealthURL}
- {var: events, annotation: events, key: events}
- {var: podDeletionCost, annotation: pod-deletion-cost, key: podDeletionCost}
- {var: logFormat, annotation: log-format, key: logFormat}
- {var: logLevel, annotation: log-level, key: logLevel}
{{- end }}

{{/*
The CEL expression of a setting's value (a string): the Pod's annotation,
else the parameter's key, else the chart's default. Both policies define
the variables annotations and params it reads.

Usage:
  {{ include "leader-sidecar-injector.settingValue" (list $setting $) }}
*/}}
{{- define "leader-sidecar-injector.settingValue" -}}
{{- $s := index . 0 }}
{{- $ := index . 1 -}}
variables.annotations[?"leader-sidecar.io/{{ $s.annotation }}"].orValue(variables.params[?{{ $s.key | quote }}].orValue({{ index $.Values.defaults $s.key | toString | quote }}))
{{- end }}

{{/*
The CEL expression true when the Pod already runs the sidecar: a container
or init container named leader-sidecar (the injector's, the library
chart's default) or, under any other name (the library chart's
sidecar.name), given LEADER_SIDECAR_LEASE_NAME, as every sidecar the
charts render is.
*/}}
{{- define "leader-sidecar-injector.hasSidecar" -}}
(object.spec.?initContainers.orValue([]) + object.spec.?containers.orValue([])).exists(c, c.name == "leader-sidecar" || c.?env.orValue([]).exists(e, e.name == "LEADER_SIDECAR_LEASE_NAME"))
{{- end }}

{{/*
The parameter's data: image, pull policy, resources and the defaults, all
strings. The cluster default ConfigMap has it all; a namespace's own
ConfigMap the same with its settings over it.

Usage:
  {{- include "leader-sidecar-injector.paramData" (dict "settings" $s "context" $) }}
*/}}
{{- define "leader-sidecar-injector.paramData" -}}
{{- $v := .context.Values }}
{{- $data := dict "image" (include "leader-sidecar-injector.image" .context) "imagePullPolicy" $v.image.pullPolicy }}
{{- range $kind := list "requests" "limits" }}
{{- range $res := list "cpu" "memory" }}
{{- with index ($v.resources | default dict) $kind | default dict }}
{{- with index . $res }}
{{- $_ := set $data (printf "resources.%s.%s" $kind $res) (toString .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $k, $d := $v.defaults }}
{{- $_ := set $data $k (toString $d) }}
{{- end }}
{{- range $k, $d := .settings | default dict }}
{{- $_ := set $data $k (toString $d) }}
{{- end }}
{{- range $k, $d := $data }}
{{ $k }}: {{ $d | quote }}
{{- end }}
{{- end }}

{{/*
The namespaceSelector of the bindings: never kube-system (or the other
excluded namespaces) nor the release's own; with "namespace", only the
namespaces labelled leader-sidecar.io/settings=namespace (which use their
own parameter), else only the others.

Usage:
  {{- include "leader-sidecar-injector.namespaceSelector" (list "namespace" $) | nindent 4 }}
*/}}
{{- define "leader-sidecar-injector.namespaceSelector" -}}
{{- $which := index . 0 }}
{{- $ := index . 1 -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- range uniq (append ($.Values.excludedNamespaces | default list) $.Release.Namespace) }}
      - {{ . | quote }}
      {{- end }}
  - key: leader-sidecar.io/settings
    {{- if eq $which "namespace" }}
    operator: In
    values: ["namespace"]
    {{- else }}
    operator: NotIn
    values: ["namespace"]
    {{- end }}
{{- end }}

{{/*
The objectSelector of the bindings: only the Pods that opt in, so no CEL
runs for any other Pod.
*/}}
{{- define "leader-sidecar-injector.objectSelector" -}}
matchLabels:
  leader-sidecar.io/inject: "true"
{{- end }}

{{/*
The paramRef of a binding: the cluster default ConfigMap in the release's
namespace, or ("namespace") the one of the Pod's own namespace (an empty
namespace), which must exist in a namespace labelled for it.
*/}}
{{- define "leader-sidecar-injector.paramRef" -}}
{{- $which := index . 0 }}
{{- $ := index . 1 -}}
name: {{ include "leader-sidecar-injector.name" $ }}
{{- if ne $which "namespace" }}
namespace: {{ $.Release.Namespace }}
{{- end }}
parameterNotFoundAction: Deny
{{- end }}
