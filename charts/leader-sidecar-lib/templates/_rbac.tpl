{{/*
The least privilege the sidecar needs with the settings given, as Role
rules (list items); empty when it does not talk to the Kubernetes API
(sqlite backend with readiness mode none or probe).

- lease backend: get, update and watch on the one Lease by name (the watch
  selects the name with a field selector, which RBAC matches against
  resourceNames); create on leases unless the chart creates the Lease (RBAC
  cannot restrict create by name); create on events.k8s.io events when
  Events are on.
- lease backend in shard mode: get, list, watch, create and update on every
  Lease of the namespace, and nothing else: the group's Leases include one
  per member, named after its Pod, so no resourceNames can list them, and a
  replica lists the members' Leases. It never deletes a Lease. Whoever
  holds this Role can edit every Lease of the namespace. Create on
  events.k8s.io events when Events are on, as above (one per shard's term).
- pod-condition mode: get pods and patch pods/status (its own Pod's
  condition).
- label mode, or podDeletionCost with the lease backend outside shard
  mode: get and patch pods (its own Pod's label, its deletion cost).
*/}}
{{- define "leader-sidecar-lib.rules" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $mode := $c.readiness.mode }}
{{- $rules := list }}
{{- if and (eq $c.backend "lease") $c.sharding.enabled }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "get" "list" "watch" "create" "update")) }}
{{- else if eq $c.backend "lease" }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "resourceNames" (list (include "leader-sidecar-lib.leaseName" .)) "verbs" (list "get" "update" "watch")) }}
{{- if not $c.lease.create }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create")) }}
{{- end }}
{{- end }}
{{- if and (eq $c.backend "lease") $c.events }}
{{- $rules = append $rules (dict "apiGroups" (list "events.k8s.io") "resources" (list "events") "verbs" (list "create")) }}
{{- end }}
{{- $cost := and (eq $c.backend "lease") $c.podDeletionCost (not $c.sharding.enabled) }}
{{- if or (eq $mode "label") $cost }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" (list "get" "patch")) }}
{{- else if eq $mode "pod-condition" }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" (list "get")) }}
{{- end }}
{{- if eq $mode "pod-condition" }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods/status") "verbs" (list "patch")) }}
{{- end }}
{{- with $rules }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount, when the library makes it (see
leader-sidecar-lib.serviceAccountChoice): never when the including chart
has its own serviceAccount values, unless sidecar.serviceAccount.create.
*/}}
{{- define "leader-sidecar-lib.serviceAccount" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if (include "leader-sidecar-lib.serviceAccountChoice" . | fromYaml).create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "leader-sidecar-lib.serviceAccountName" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  {{- with $c.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: false
{{- end }}
{{- end }}

{{/*
The Role (when sidecar.rbac.create and the sidecar needs any rule).
*/}}
{{- define "leader-sidecar-lib.role" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $rules := include "leader-sidecar-lib.rules" . }}
{{- if and $c.rbac.create $rules }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
rules:
  {{- $rules | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The RoleBinding of that Role to the ServiceAccount the Pod runs as. Never
to the namespace's default ServiceAccount unless it is named: every Pod
that runs as default would gain the Role.
*/}}
{{- define "leader-sidecar-lib.roleBinding" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if and $c.rbac.create (include "leader-sidecar-lib.rules" .) }}
{{- $sa := include "leader-sidecar-lib.serviceAccountChoice" . | fromYaml }}
{{- if not $sa.name }}
{{- $prefix := ternary "" "sidecar." $sa.chartOwned }}
{{- fail (printf "leader-sidecar-lib: the Pod would run as the namespace's \"default\" ServiceAccount, and the sidecar's Role would be granted to every Pod that runs as \"default\": set %sserviceAccount.name to the ServiceAccount the Pod runs as (\"default\" only if you mean it), or %sserviceAccount.create=true" $prefix $prefix) }}
{{- end }}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "leader-sidecar-lib.fullname" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "leader-sidecar-lib.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The Lease, when the chart creates it (sidecar.lease.create, lease backend).
Empty: the first sidecar to acquire it fills it in with token 1. Kept on
helm uninstall: its leaseTransitions is the fencing token, and a Lease
created anew would start again at 1, below tokens the app's resources
have already accepted. Reinstalling the release adopts it.
*/}}
{{- define "leader-sidecar-lib.lease" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if and $c.lease.create (eq $c.backend "lease") }}
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: {{ include "leader-sidecar-lib.leaseName" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/resource-policy: keep
spec: {}
{{- end }}
{{- end }}

{{/*
The release of the Lease on helm uninstall (sidecar.releaseOnUninstall,
lease backend, when the chart makes the RBAC), or in shard mode of the
group's shard Leases (<group>-shard-<i>; the members' Leases are owned by
their Pods, or lapse): a post-delete hook. Helm deletes the sidecars'
Role and RoleBinding as it deletes their Deployment, before the stopping
leader can release, so the
Lease would name a Pod that is gone until its lease passes, and a quick
reinstall would wait it out. Once the release's objects are deleted, a Job
of the sidecar's image, under a ServiceAccount of its own that may get and
update those Leases only, runs `sidecar reset --backend lease --if-abandoned`:
it waits out the holder's lease as any candidate would (so a holder that
could still run is never overlapped) and writes the release, token kept;
a Lease that some live holder renews meanwhile is in use elsewhere and is
left. The hook's objects are deleted once it succeeds.
*/}}
{{- define "leader-sidecar-lib.uninstallRelease" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if and $c.releaseOnUninstall $c.rbac.create (eq $c.backend "lease") }}
{{- $name := printf "%s-release" (include "leader-sidecar-lib.fullname" . | trunc 55 | trimSuffix "-") }}
{{- $lease := include "leader-sidecar-lib.leaseName" . }}
{{- $group := toString $c.sharding.group | default $lease }}
{{- $leases := list $lease }}
{{- if $c.sharding.enabled }}
{{- $leases = list }}
{{- range $i := until (int $c.sharding.shards) }}
{{- $leases = append $leases (printf "%s-shard-%d" $group $i) }}
{{- end }}
{{- end }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/hook: post-delete
    helm.sh/hook-weight: "-1"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/hook: post-delete
    helm.sh/hook-weight: "-1"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ range $i, $l := $leases }}{{ if $i }}, {{ end }}{{ $l | quote }}{{ end }}]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/hook: post-delete
    helm.sh/hook-weight: "-1"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ .Release.Namespace }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $name }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/hook: post-delete
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: 3
  ttlSecondsAfterFinished: 600
  template:
    metadata:
      labels:
        {{- include "leader-sidecar-lib.labels" . | nindent 8 }}
    spec:
      restartPolicy: Never
      serviceAccountName: {{ $name }}
      securityContext:
        {{- include "leader-sidecar-lib.podSecurityContext" . | nindent 8 }}
      containers:
        - name: release
          image: {{ include "leader-sidecar-lib.imageRef" $c.image | quote }}
          imagePullPolicy: {{ $c.image.pullPolicy }}
          terminationMessagePolicy: FallbackToLogsOnError
          args:
            - reset
            - --backend=lease
            - --namespace={{ .Release.Namespace }}
            - --lease-name={{ $lease }}
            {{- if $c.sharding.enabled }}
            - --shards={{ int $c.sharding.shards }}
            - --shard-group={{ $group }}
            {{- end }}
            - --lease-duration={{ $c.leaseDuration }}
            {{- if ne (toString $c.maxRecordLeaseDuration) "" }}
            - --max-record-lease-duration={{ $c.maxRecordLeaseDuration }}
            {{- end }}
            - --if-abandoned
          securityContext:
            {{- include "leader-sidecar-lib.containerSecurityContext" . | nindent 12 }}
          resources:
            requests:
              cpu: 10m
              memory: 16Mi
            limits:
              memory: 64Mi
{{- end }}
{{- end }}

{{/*
The Secret of backend postgres's connection string, when it is given as
sidecar.postgres.url (with sidecar.postgres.existingSecret the user's
Secret is read, and none is rendered).
*/}}
{{- define "leader-sidecar-lib.postgresSecret" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if and (eq $c.backend "postgres") $c.postgres.url }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "leader-sidecar-lib.postgresSecretName" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
type: Opaque
stringData:
  {{ $c.postgres.key }}: {{ $c.postgres.url | quote }}
{{- end }}
{{- end }}

{{/*
The name of the Secret the sidecar reads backend postgres's connection
string from.
*/}}
{{- define "leader-sidecar-lib.postgresSecretName" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $c.postgres.existingSecret | default (printf "%s-postgres" (include "leader-sidecar-lib.fullname" . | trunc 54 | trimSuffix "-")) }}
{{- end }}

{{/*
All of the above, as a multi-document YAML stream: put
`{{ include "leader-sidecar-lib.rbac" . }}` alone in a template file.
*/}}
{{- define "leader-sidecar-lib.rbac" -}}
{{- range $t := list "serviceAccount" "role" "roleBinding" "podPatchPolicy" "lease" "postgresSecret" "uninstallRelease" }}
{{- with include (printf "leader-sidecar-lib.%s" $t) $ }}
---
{{ . }}
{{- end }}
{{- end }}
{{- end }}
