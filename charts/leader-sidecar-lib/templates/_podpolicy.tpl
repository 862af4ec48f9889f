{{/*
The narrowing of patch on pods (sidecar.rbac.podPatchPolicy). RBAC cannot
restrict patch to one Pod or to a few fields, so a Role that lets the
sidecar set its leader's deletion cost (or its role label, in label mode)
lets its ServiceAccount change any Pod of the namespace. Where the cluster
serves ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), this
policy, bound to the release's namespace, lets that ServiceAccount update
only the Pod its token is bound to (the token's
authentication.kubernetes.io/pod-name, which every projected token of a
Pod carries), and there change only the annotation
controller.kubernetes.io/pod-deletion-cost and the role label: the spec
and every other label and annotation stay as they were. Cluster-scoped,
so installing a chart with it needs the right to create admission
policies; set sidecar.rbac.podPatchPolicy=false where it cannot be.
*/}}
{{- define "leader-sidecar-lib.podPatchPolicy" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $rules := include "leader-sidecar-lib.rules" . | fromYamlArray }}
{{- $patchesPods := false }}
{{- range $r := $rules }}
{{- if and (has "pods" $r.resources) (has "patch" $r.verbs) }}
{{- $patchesPods = true }}
{{- end }}
{{- end }}
{{- if and $c.rbac.create $c.rbac.podPatchPolicy $patchesPods (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") }}
{{- $name := printf "leader-sidecar.%s.%s" .Release.Namespace (include "leader-sidecar-lib.fullname" .) | trunc 253 | trimSuffix "." }}
{{- $user := printf "system:serviceaccount:%s:%s" .Release.Namespace (include "leader-sidecar-lib.serviceAccountName" .) }}
{{- $label := ternary $c.readiness.roleLabel "" (eq $c.readiness.mode "label") }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["pods"]
  matchConditions:
    - name: the-sidecars-service-account
      expression: request.userInfo.username == {{ $user | quote }}
  variables:
    - name: boundPod
      expression: >-
        request.userInfo.?extra["authentication.kubernetes.io/pod-name"].orValue([""])[0]
    - name: otherAnnotationsKept
      expression: >-
        object.metadata.?annotations.orValue({}).filter(k, k != "controller.kubernetes.io/pod-deletion-cost")
        .all(k, oldObject.metadata.?annotations.orValue({})[?k] == optional.of(object.metadata.annotations[k])) &&
        oldObject.metadata.?annotations.orValue({}).filter(k, k != "controller.kubernetes.io/pod-deletion-cost")
        .all(k, object.metadata.?annotations.orValue({})[?k].hasValue())
    - name: otherLabelsKept
      expression: >-
        object.metadata.?labels.orValue({}).filter(k, k != {{ $label | quote }})
        .all(k, oldObject.metadata.?labels.orValue({})[?k] == optional.of(object.metadata.labels[k])) &&
        oldObject.metadata.?labels.orValue({}).filter(k, k != {{ $label | quote }})
        .all(k, object.metadata.?labels.orValue({})[?k].hasValue())
  validations:
    - expression: object.metadata.name == variables.boundPod
      messageExpression: >-
        "the sidecar's ServiceAccount may change only the Pod its token is bound to (" +
        (variables.boundPod == "" ? "none: the token names no Pod" : variables.boundPod) + "), not " + object.metadata.name
      reason: Forbidden
    - expression: object.spec == oldObject.spec
      message: "the sidecar's ServiceAccount may not change a Pod's spec"
      reason: Forbidden
    - expression: variables.otherAnnotationsKept
      message: "the sidecar's ServiceAccount may change only the annotation controller.kubernetes.io/pod-deletion-cost of its Pod"
      reason: Forbidden
    - expression: variables.otherLabelsKept
      message: {{ (ternary (printf "the sidecar's ServiceAccount may change only the label %s of its Pod" $label) "the sidecar's ServiceAccount may change no label of its Pod" (ne $label "")) | quote }}
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
spec:
  policyName: {{ $name }}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ .Release.Namespace }}
{{- end }}
{{- end }}
