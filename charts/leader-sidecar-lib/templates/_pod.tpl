{{/*
Pod settings from the including chart's top-level values, as keys of the
Pod spec; nothing when none is set. The values have the names `helm create`
and most charts give them:

- priorityClassName: the Pod's PriorityClass;
- topologySpreadConstraints: as in the Pod spec; a constraint without a
  labelSelector gets this release's selector labels, so the replicas spread
  over nodes or zones among themselves;
- imagePullSecrets: Secret names, as strings or as {name: ...}, for images
  from a private registry (the sidecar's and the app's).

The Pod spec must not have these keys of its own (helm create's template
renders imagePullSecrets: drop its block): a key rendered twice is refused
by a strict decoder and replaces the first in a lenient one.

Usage:
  spec:
    {{- with include "leader-sidecar-lib.podSettings" . }}
    {{- . | nindent 4 }}
    {{- end }}
*/}}
{{- define "leader-sidecar-lib.podSettings" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
{{- if not (kindIs "slice" .) }}
{{- fail "leader-sidecar-lib: topologySpreadConstraints must be a list of constraints" }}
{{- end }}
topologySpreadConstraints:
{{- range . }}
{{- if not (kindIs "map" .) }}
{{- fail (printf "leader-sidecar-lib: each of topologySpreadConstraints must be a map with maxSkew, topologyKey and whenUnsatisfiable, not %v" .) }}
{{- end }}
{{- $constraint := deepCopy . }}
{{- if not (hasKey $constraint "labelSelector") }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "leader-sidecar-lib.selectorLabels" $ | fromYaml)) }}
{{- end }}
  - {{ toYaml $constraint | nindent 4 | trim }}
{{- end }}
{{- end }}
{{- with .Values.imagePullSecrets }}
{{- if not (kindIs "slice" .) }}
{{- fail "leader-sidecar-lib: imagePullSecrets must be a list of Secret names" }}
{{- end }}
imagePullSecrets:
{{- range . }}
{{- if kindIs "string" . }}
  - name: {{ . | quote }}
{{- else if and (kindIs "map" .) .name }}
  - name: {{ .name | quote }}
{{- else }}
{{- fail (printf "leader-sidecar-lib: each of imagePullSecrets must be a Secret name or {name: ...}, not %v" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
An image reference from an image map (repository, tag, digest): with a
digest, repository@digest (the tag is then only a label for people);
else repository:tag.
*/}}
{{- define "leader-sidecar-lib.imageRef" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository (toString .tag) }}
{{- end }}
{{- end }}
