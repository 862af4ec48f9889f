{{/*
Pod-level pieces for the Deployment (or StatefulSet) that runs the sidecar.
The helpers of a list the chart may have too (initContainers, volumes) take
the chart's own list and render the one key for both: a second key in the
Pod spec would be refused by a strict decoder and would silently replace
the first in a lenient one. A typical Pod template:

  spec:
    serviceAccountName: {{ include "leader-sidecar-lib.serviceAccountName" . }}
    automountServiceAccountToken: false
    {{- with include "leader-sidecar-lib.readinessGates" . }}
    readinessGates:
      {{- . | nindent 6 }}
    {{- end }}
    {{- with include "leader-sidecar-lib.initContainers" (dict "initContainers" .Values.initContainers "context" $) }}
    {{- . | nindent 4 }}
    {{- end }}
    containers:
      - name: app
        ...
      {{- include "leader-sidecar-lib.containers" . | nindent 6 }}
    {{- with include "leader-sidecar-lib.volumes" (dict "volumes" .Values.volumes "context" $) }}
    {{- . | nindent 4 }}
    {{- end }}
*/}}

{{/*
listArgs checks the arguments of a helper that merges a list of the chart's
with the sidecar's: a dict with the root context under "context" and the
chart's list (or nothing) under the list's name; it fails naming the
helper otherwise, and renders nothing.

Usage:
  {{- include "leader-sidecar-lib.listArgs" (list "leader-sidecar-lib.volumes" "volumes" .) }}
*/}}
{{- define "leader-sidecar-lib.listArgs" -}}
{{- $helper := index . 0 }}
{{- $key := index . 1 }}
{{- $args := index . 2 }}
{{- if not (and (kindIs "map" $args) (hasKey $args "context")) }}
{{- fail (printf "%s takes (dict \"%s\" .Values.%s \"context\" $), the chart's own %s and the root context, and renders the %s: key itself; see its Usage in the library's templates" $helper $key $key $key $key) }}
{{- end }}
{{- with index $args $key }}
{{- if not (kindIs "slice" .) }}
{{- fail (printf "%s: %s must be a list, not %v" $helper $key .) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Pod securityContext of Pod Security "restricted": non-root, seccomp
RuntimeDefault, and the uid, gid and fsGroup of sidecar.securityContext
(65532, the distroless nonroot user; each left out when null).

Usage:
  securityContext:
    {{- include "leader-sidecar-lib.podSecurityContext" . | nindent 4 }}
*/}}
{{- define "leader-sidecar-lib.podSecurityContext" -}}
{{- $ids := (include "leader-sidecar-lib.config" . | fromYaml).securityContext -}}
runAsNonRoot: true
{{- include "leader-sidecar-lib.ids" (list $ids "runAsUser" "runAsGroup" "fsGroup") }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The container securityContext of Pod Security "restricted": non-root, no
privilege escalation, every capability dropped, read-only root filesystem,
and the uid and gid of sidecar.securityContext (each left out when null).
The sidecar container has it; the example chart gives it to its app
container too.

Usage:
  securityContext:
    {{- include "leader-sidecar-lib.containerSecurityContext" . | nindent 4 }}
*/}}
{{- define "leader-sidecar-lib.containerSecurityContext" -}}
{{- $ids := (include "leader-sidecar-lib.config" . | fromYaml).securityContext -}}
runAsNonRoot: true
{{- include "leader-sidecar-lib.ids" (list $ids "runAsUser" "runAsGroup") }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
ids renders the named keys of a map of ids as whole numbers, one a line
(each after a newline), leaving out those that are null.

Usage:
  {{- include "leader-sidecar-lib.ids" (list $ids "runAsUser" "runAsGroup") }}
*/}}
{{- define "leader-sidecar-lib.ids" -}}
{{- $ids := first . }}
{{- range $key := rest . }}
{{- $id := index $ids $key }}
{{- if not (kindIs "invalid" $id) }}
{{ $key }}: {{ int64 $id }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The sidecar container (one container, not a list item). Its one-line
error on a bad setting (exit status 2) is its termination message
(FallbackToLogsOnError), so `kubectl describe pod` shows it.

Usage (leader-sidecar-lib.initContainers and .containers render it as a
list item where it belongs):
  containers:
    - {{ include "leader-sidecar-lib.container" . | nindent 6 | trim }}
*/}}
{{- define "leader-sidecar-lib.container" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- include "leader-sidecar-lib.checkTrustAcrossTheRollout" . }}
{{- $mode := $c.readiness.mode -}}
name: {{ $c.name }}
image: {{ include "leader-sidecar-lib.imageRef" $c.image | quote }}
imagePullPolicy: {{ $c.image.pullPolicy }}
terminationMessagePolicy: FallbackToLogsOnError
{{- if $c.native }}
# A native sidecar: started before the app containers, stopped after them.
restartPolicy: Always
{{- end }}
args:
  - --ops-address=:{{ $c.opsPort }}
  {{- with $c.extraArgs }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
env:
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  - name: POD_UID
    valueFrom:
      fieldRef:
        fieldPath: metadata.uid
  # The Pod's revision (a label it lacks gives ""): a stopping leader hands
  # off to a Pod of another revision first, so a rollout moves it once.
  - name: POD_TEMPLATE_HASH
    valueFrom:
      fieldRef:
        fieldPath: metadata.labels['pod-template-hash']
  - name: POD_CONTROLLER_REVISION_HASH
    valueFrom:
      fieldRef:
        fieldPath: metadata.labels['controller-revision-hash']
  - name: LEADER_SIDECAR_BACKEND
    value: {{ $c.backend | quote }}
  - name: LEADER_SIDECAR_LEASE_NAME
    value: {{ include "leader-sidecar-lib.leaseName" . | quote }}
  - name: LEADER_SIDECAR_LEASE_DURATION
    value: {{ $c.leaseDuration | quote }}
  - name: LEADER_SIDECAR_RENEW_DEADLINE
    value: {{ $c.renewDeadline | quote }}
  - name: LEADER_SIDECAR_RETRY_PERIOD
    value: {{ $c.retryPeriod | quote }}
  {{- if ne (toString $c.renewInterval) "" }}
  - name: LEADER_SIDECAR_RENEW_INTERVAL
    value: {{ $c.renewInterval | quote }}
  {{- end }}
  {{- if ne (toString $c.maxRecordLeaseDuration) "" }}
  - name: LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION
    value: {{ $c.maxRecordLeaseDuration | quote }}
  {{- end }}
  {{- with $c.appHealth.url }}
  - name: LEADER_SIDECAR_APP_HEALTH_URL
    value: {{ . | quote }}
  - name: LEADER_SIDECAR_APP_HEALTH_PERIOD
    value: {{ $c.appHealth.period | quote }}
  - name: LEADER_SIDECAR_APP_HEALTH_FAILURES
    value: {{ $c.appHealth.failures | toString | quote }}
  - name: LEADER_SIDECAR_APP_HEALTH_TIMEOUT
    value: {{ $c.appHealth.timeout | quote }}
  {{- end }}
  - name: LEADER_SIDECAR_RELEASE_ON_SHUTDOWN
    value: {{ $c.releaseOnShutdown | toString | quote }}
  {{- if ne (toString $c.awaitReplacement) "" }}
  - name: LEADER_SIDECAR_AWAIT_REPLACEMENT
    value: {{ $c.awaitReplacement | quote }}
  {{- end }}
  - name: LEADER_SIDECAR_HTTP_ADDRESS
    value: {{ printf "127.0.0.1:%v" $c.httpPort | quote }}
  # Also read by `sidecar probe <path>`, for exec probes.
  - name: LEADER_SIDECAR_OPS_ADDRESS
    value: {{ printf ":%v" $c.opsPort | quote }}
  - name: LEADER_SIDECAR_READINESS_MODE
    value: {{ $mode | quote }}
  {{- if eq $mode "pod-condition" }}
  - name: LEADER_SIDECAR_READINESS_CONDITION_TYPE
    value: {{ $c.readiness.conditionType | quote }}
  {{- end }}
  {{- if eq $mode "label" }}
  - name: LEADER_SIDECAR_ROLE_LABEL
    value: {{ $c.readiness.roleLabel | quote }}
  {{- end }}
  {{- if eq $c.backend "lease" }}
  - name: LEADER_SIDECAR_EVENTS
    value: {{ $c.events | toString | quote }}
  - name: LEADER_SIDECAR_POD_DELETION_COST
    value: {{ and $c.podDeletionCost (not $c.sharding.enabled) | toString | quote }}
  {{- end }}
  {{- if $c.sharding.enabled }}
  - name: LEADER_SIDECAR_SHARDS
    value: {{ $c.sharding.shards | toString | quote }}
  {{- with $c.sharding.group }}
  - name: LEADER_SIDECAR_SHARD_GROUP
    value: {{ . | quote }}
  {{- end }}
  - name: LEADER_SIDECAR_SHARD_REBALANCE_DELAY
    value: {{ $c.sharding.rebalanceDelay | quote }}
  - name: LEADER_SIDECAR_SHARD_DRAIN_TIMEOUT
    value: {{ $c.sharding.drainTimeout | quote }}
  - name: LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT
    value: {{ $c.sharding.stopDrainTimeout | quote }}
  - name: LEADER_SIDECAR_SHARD_MAX_PER_MEMBER
    value: {{ $c.sharding.maxPerMember | toString | quote }}
  {{- end }}
  {{- if eq $c.backend "postgres" }}
  - name: LEADER_SIDECAR_POSTGRES_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "leader-sidecar-lib.postgresSecretName" . | quote }}
        key: {{ $c.postgres.key | quote }}
  {{- with $c.postgres.schema }}
  - name: LEADER_SIDECAR_POSTGRES_SCHEMA
    value: {{ . | quote }}
  {{- end }}
  - name: LEADER_SIDECAR_POSTGRES_TABLE
    value: {{ $c.postgres.table | quote }}
  - name: LEADER_SIDECAR_POSTGRES_SIGNAL
    value: {{ $c.postgres.signal | quote }}
  {{- end }}
  {{- if eq $c.backend "sqlite" }}
  - name: LEADER_SIDECAR_SQLITE_PATH
    value: {{ printf "%s/%s" $c.sqlite.dir $c.sqlite.file | quote }}
  {{- end }}
  - name: LEADER_SIDECAR_LOG_FORMAT
    value: {{ $c.logFormat | quote }}
  - name: LEADER_SIDECAR_LOG_LEVEL
    value: {{ $c.logLevel | quote }}
  {{- with $c.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  - name: ops
    containerPort: {{ $c.opsPort }}
    protocol: TCP
{{- if $c.waitForLeadership }}
# The app starts only once this replica leads (native sidecar): a standby
# waits here for as long as it takes.
startupProbe:
  httpGet:
    path: /leader/ready
    port: ops
  periodSeconds: 1
  failureThreshold: 2147483647
{{- else }}
# The app starts only once the sidecar serves (native sidecar).
startupProbe:
  httpGet:
    path: /healthz
    port: ops
  periodSeconds: 1
  failureThreshold: 60
{{- end }}
livenessProbe:
  httpGet:
    path: /healthz
    port: ops
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    {{- if eq $mode "probe" }}
    # Only the leader is Ready.
    path: /leader/ready
    {{- else }}
    path: /readyz
    {{- end }}
    port: ops
  periodSeconds: 2
  failureThreshold: 1
securityContext:
  {{- include "leader-sidecar-lib.containerSecurityContext" . | nindent 2 }}
{{- with $c.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if or (eq $c.backend "sqlite") (include "leader-sidecar-lib.needsKubeAPI" .) }}
volumeMounts:
  {{- if eq $c.backend "sqlite" }}
  - name: leader-sidecar-db
    mountPath: {{ $c.sqlite.dir }}
  {{- end }}
  {{- if include "leader-sidecar-lib.needsKubeAPI" . }}
  # The ServiceAccount token, for this container only (the Pod has
  # automountServiceAccountToken: false).
  - name: leader-sidecar-token
    mountPath: /var/run/secrets/kubernetes.io/serviceaccount
    readOnly: true
  {{- end }}
{{- end }}
{{- end }}

{{/*
The Pod's initContainers: key: the sidecar first when it is a native
sidecar (so the chart's init containers can ask it, and with
waitForLeadership run only once this replica leads), then the chart's own
init containers; nothing when there are none.

Usage:
  {{- with include "leader-sidecar-lib.initContainers" (dict "initContainers" .Values.initContainers "context" $) }}
  {{- . | nindent 6 }}
  {{- end }}

Params:
  - initContainers: the chart's own init containers (a list; nil or empty
    for none). Do not render an initContainers: key of your own.
  - context: the root context ($)
*/}}
{{- define "leader-sidecar-lib.initContainers" -}}
{{- include "leader-sidecar-lib.listArgs" (list "leader-sidecar-lib.initContainers" "initContainers" .) }}
{{- $c := include "leader-sidecar-lib.config" .context | fromYaml }}
{{- if or $c.native .initContainers -}}
initContainers:
{{- if $c.native }}
  - {{ include "leader-sidecar-lib.container" .context | trim | nindent 4 | trim }}
{{- end }}
{{- with .initContainers }}
{{- if and $c.native (has $c.name (include "leader-sidecar-lib.names" . | fromYamlArray)) }}
{{- fail (printf "leader-sidecar-lib.initContainers: the chart's initContainers have one named %q, the sidecar's name (sidecar.name)" $c.name) }}
{{- end }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The sidecar as a list item for containers when it is a plain container
(sidecar.native: false), else nothing.
*/}}
{{- define "leader-sidecar-lib.containers" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if not $c.native -}}
- {{ include "leader-sidecar-lib.container" . | trim | nindent 2 | trim }}
{{- end }}
{{- end }}

{{/*
The Pod's readinessGates (list items) in pod-condition mode, else nothing.
*/}}
{{- define "leader-sidecar-lib.readinessGates" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if eq $c.readiness.mode "pod-condition" -}}
- conditionType: {{ $c.readiness.conditionType | quote }}
{{- end }}
{{- end }}

{{/*
The Pod's volumes: key: the chart's own volumes first, then the sidecar's
(the SQLite directory with the sqlite backend; the ServiceAccount token
when the sidecar talks to the API server, what the kubelet would automount:
token, ca.crt, namespace, mounted by the sidecar container alone); nothing
when there are none. A chart volume with the name of one of the sidecar's
fails the render.

Usage:
  {{- with include "leader-sidecar-lib.volumes" (dict "volumes" .Values.volumes "context" $) }}
  {{- . | nindent 6 }}
  {{- end }}

Params:
  - volumes: the chart's own volumes (a list; nil or empty for none). Do
    not render a volumes: key of your own.
  - context: the root context ($)
*/}}
{{- define "leader-sidecar-lib.volumes" -}}
{{- include "leader-sidecar-lib.listArgs" (list "leader-sidecar-lib.volumes" "volumes" .) }}
{{- $sidecar := include "leader-sidecar-lib.sidecarVolumes" .context | trim }}
{{- if or .volumes $sidecar -}}
volumes:
{{- with .volumes }}
{{- $names := include "leader-sidecar-lib.names" . | fromYamlArray }}
{{- range $sidecar | fromYamlArray }}
{{- if has .name $names }}
{{- fail (printf "leader-sidecar-lib.volumes: the chart's volumes have one named %q, a name the sidecar's volume has" .name) }}
{{- end }}
{{- end }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $sidecar }}
{{- . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
names is the names of a list of maps (containers, volumes), as a YAML
list.

Usage:
  {{- $names := include "leader-sidecar-lib.names" .Values.volumes | fromYamlArray }}
*/}}
{{- define "leader-sidecar-lib.names" -}}
{{- $names := list }}
{{- range . }}
{{- if kindIs "map" . }}
{{- $names = append $names (toString .name) }}
{{- end }}
{{- end }}
{{- toYaml $names }}
{{- end }}

{{/*
The sidecar's own volumes, as list items (the SQLite directory with the
sqlite backend; the ServiceAccount token when the sidecar talks to the API
server), else nothing. leader-sidecar-lib.volumes renders them with the
chart's.

Usage:
  {{- include "leader-sidecar-lib.sidecarVolumes" . }}
*/}}
{{- define "leader-sidecar-lib.sidecarVolumes" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if eq $c.backend "sqlite" }}
- name: leader-sidecar-db
  {{- if eq $c.sqlite.volume.type "hostPath" }}
  hostPath:
    path: {{ $c.sqlite.volume.hostPath }}
    type: DirectoryOrCreate
  {{- else }}
  persistentVolumeClaim:
    claimName: {{ required "sidecar.sqlite.volume.claimName is required with sidecar.sqlite.volume.type persistentVolumeClaim" $c.sqlite.volume.claimName }}
  {{- end }}
{{- end }}
{{- if include "leader-sidecar-lib.needsKubeAPI" . }}
- name: leader-sidecar-token
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- end }}
{{- end }}

{{/*
The Deployment strategy (a map). With leader-only readiness (probe,
pod-condition, or waitForLeadership) a RollingUpdate can never finish: followers are never Ready,
so the controller may not remove the old leader, and new Pods cannot become
Ready while it leads. Recreate removes the old Pods first (the leader
releases the Lease on the way out) and cannot stall. An upgrade that moves
the election to another store or record (leader-sidecar-lib.electionMoves)
is a Recreate too: old and new Pods side by side would elect in two places
and lead at once. Otherwise the strategy is `strategy` from the chart's
values, else RollingUpdate.
*/}}
{{- define "leader-sidecar-lib.strategy" -}}
{{- if include "leader-sidecar-lib.leaderOnlyReadiness" . -}}
type: Recreate
{{- else if include "leader-sidecar-lib.electionMoves" . -}}
# This upgrade moves the election ({{ include "leader-sidecar-lib.electionMoves" . | replace "\n" " " }}):
# old Pods are gone before new ones start, so they never lead at once.
type: Recreate
{{- else if .Values.strategy -}}
{{ toYaml .Values.strategy }}
{{- else -}}
type: RollingUpdate
{{- end }}
{{- end }}

{{/*
The sidecar of the running Deployment named leader-sidecar-lib.fullname
in the release's namespace, as YAML: container, the container or init
container that sets LEADER_SIDECAR_BACKEND, and dbVolume, the Pod's
volume leader-sidecar-db (the SQLite directory) if it has one; "" on a
first install, or where the API server is not read (helm template).
Upgrades compare it with what they render.
*/}}
{{- define "leader-sidecar-lib.runningSidecar" -}}
{{- with lookup "apps/v1" "Deployment" .Release.Namespace (include "leader-sidecar-lib.fullname" .) }}
{{- $found := dict }}
{{- range $container := concat (.spec.template.spec.initContainers | default list) (.spec.template.spec.containers | default list) }}
{{- range $container.env | default list }}
{{- if eq .name "LEADER_SIDECAR_BACKEND" }}
{{- $found = $container }}
{{- end }}
{{- end }}
{{- end }}
{{- $volume := dict }}
{{- range .spec.template.spec.volumes | default list }}
{{- if eq .name "leader-sidecar-db" }}{{ $volume = . }}{{ end }}
{{- end }}
{{- with $found }}{{ toYaml (dict "container" . "dbVolume" $volume) }}{{ end }}
{{- end }}
{{- end }}

{{/*
A sidecar container's settings (a map) as a YAML map from flag name to
value: each LEADER_SIDECAR_ variable of its env (the last of a name wins,
as in Kubernetes; one from a Secret is "secret <name>/<key>", from
elsewhere its source as JSON), then each flag of its args, as
--flag=value or --flag value (a flag beats the variable, as in the
sidecar).
*/}}
{{- define "leader-sidecar-lib.sidecarSettings" -}}
{{- $at := dict }}
{{- range .env | default list }}
{{- if hasPrefix "LEADER_SIDECAR_" .name }}
{{- $key := .name | trimPrefix "LEADER_SIDECAR_" | lower | replace "_" "-" }}
{{- if .valueFrom }}
{{- with .valueFrom.secretKeyRef }}
{{- $_ := set $at $key (printf "secret %s/%s" .name .key) }}
{{- else }}
{{- $_ := set $at $key (toJson .valueFrom) }}
{{- end }}
{{- else }}
{{- $_ := set $at $key (toString .value) }}
{{- end }}
{{- end }}
{{- end }}
{{- $args := .args | default list }}
{{- range $i, $arg := $args }}
{{- $arg = toString $arg }}
{{- if hasPrefix "--" $arg }}
{{- $flag := trimPrefix "--" $arg }}
{{- if contains "=" $flag }}
{{- $kv := splitn "=" 2 $flag }}
{{- $_ := set $at $kv._0 $kv._1 }}
{{- else if lt (add1 $i) (len $args) }}
{{- $_ := set $at $flag (toString (index $args (add1 $i))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $at }}
{{- end }}

{{/*
What an upgrade changes of where the election is, as "<old> -> <new>";
"" when nothing, or without a running sidecar
(leader-sidecar-lib.runningSidecar). It compares
leader-sidecar-lib.electionOf of the running sidecar with this render's;
with the chart's own connection Secret (sidecar.postgres.url), a new URL
is a move too. A Pod on either side elects only with its own side, so a
rolling update of such a change would have two leaders while it runs.
*/}}
{{- define "leader-sidecar-lib.electionMoves" -}}
{{- with include "leader-sidecar-lib.runningSidecar" . | fromYaml }}
{{- $old := include "leader-sidecar-lib.electionOf" .container }}
{{- $new := include "leader-sidecar-lib.electionOf" (include "leader-sidecar-lib.container" $ | fromYaml) }}
{{- $c := include "leader-sidecar-lib.config" $ | fromYaml }}
{{- $oldDir := include "leader-sidecar-lib.sqliteVolumeOf" .dbVolume }}
{{- $newDir := include "leader-sidecar-lib.sqliteVolumeOf" (include "leader-sidecar-lib.sidecarVolumes" $ | fromYamlArray | first | default dict) }}
{{- if ne $old $new }}
{{- printf "%s -> %s" $old $new }}
{{- else if and (eq $c.backend "sqlite") (ne $oldDir $newDir) }}
{{- printf "the SQLite directory, %s -> %s" $oldDir $newDir }}
{{- else if and (eq $c.backend "postgres") $c.postgres.url }}
{{- $was := "" }}
{{- with lookup "v1" "Secret" $.Release.Namespace (include "leader-sidecar-lib.postgresSecretName" $) }}
{{- with .data }}{{ $was = index . $c.postgres.key | default "" | b64dec }}{{ end }}
{{- end }}
{{- if and $was (ne $was (toString $c.postgres.url)) }}
{{- print "sidecar.postgres.url changed" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Where the volume leader-sidecar-db (a map) is on the node: "hostPath
<path>" or "claim <name>"; "" for none.
*/}}
{{- define "leader-sidecar-lib.sqliteVolumeOf" -}}
{{- if and . (eq (toString .name) "leader-sidecar-db") }}
{{- if .hostPath }}hostPath {{ .hostPath.path }}{{ else if .persistentVolumeClaim }}claim {{ .persistentVolumeClaim.claimName }}{{ end }}
{{- end }}
{{- end }}

{{/*
Where a sidecar container (a map) elects, as one line, from
leader-sidecar-lib.sidecarSettings: its backend, election name, Lease
namespace, SQLite file, PostgreSQL connection (the Secret it is read
from, or a digest of one given in the open: it may hold a password),
schema and table, and whether and in which group it shards. Timings and
the shard count are not in it: replicas that differ in those still meet
in one record (a shard group carries its count).
*/}}
{{- define "leader-sidecar-lib.electionOf" -}}
{{- $all := include "leader-sidecar-lib.sidecarSettings" . | fromYaml }}
{{- $at := pick $all "backend" "lease-name" "namespace" "sqlite-path" "postgres-url" "postgres-schema" "postgres-table" "shard-group" }}
{{- with get $at "postgres-url" }}
{{- if not (hasPrefix "secret " .) }}
{{- $_ := set $at "postgres-url" (printf "sha256 %s" (sha256sum . | trunc 12)) }}
{{- end }}
{{- end }}
{{- $_ := set $at "shards" (ternary "sharded" "one election" (not (has (toString (get $all "shards")) (list "" "0")))) }}
{{- $parts := list }}
{{- range $key := keys $at | sortAlpha }}
{{- $parts = append $parts (printf "%s %s" $key (get $at $key)) }}
{{- end }}
{{- join ", " $parts }}
{{- end }}

{{/*
Fails an upgrade whose new and running replicas, side by side in the
rollout, would not trust each other's records for as long as each
declares: a standby waits out a record's lease duration only up to its
bound (sidecar.maxRecordLeaseDuration, ten times its own lease by
default), and one that waits less than the holder's lease could take the
record over while its holder still claims it. The bound of either side
must cover the other side's lease. The way out is an upgrade in two
steps, which the message gives.
*/}}
{{- define "leader-sidecar-lib.checkTrustAcrossTheRollout" -}}
{{- with include "leader-sidecar-lib.runningSidecar" . | fromYaml }}
{{- $c := include "leader-sidecar-lib.config" $ | fromYaml }}
{{- $old := include "leader-sidecar-lib.sidecarSettings" .container | fromYaml }}
{{- $oldLease := get $old "lease-duration" | default "15s" }}
{{- $oldLeaseMs := include "leader-sidecar-lib.milliseconds" (list "the running replicas' lease duration" $oldLease) | float64 }}
{{- $oldBoundMs := mulf 10 $oldLeaseMs }}
{{- with get $old "max-record-lease-duration" }}
{{- $oldBoundMs = include "leader-sidecar-lib.milliseconds" (list "the running replicas' max record lease duration" .) | float64 }}
{{- end }}
{{- $leaseMs := include "leader-sidecar-lib.milliseconds" (list "sidecar.leaseDuration" $c.leaseDuration) | float64 }}
{{- $boundMs := mulf 10 $leaseMs }}
{{- if ne (toString $c.maxRecordLeaseDuration) "" }}
{{- $boundMs = include "leader-sidecar-lib.milliseconds" (list "sidecar.maxRecordLeaseDuration" $c.maxRecordLeaseDuration) | float64 }}
{{- end }}
{{- if gt $oldLeaseMs $boundMs }}
{{- fail (printf "leader-sidecar-lib: the running replicas hold the lease for %s, and the new ones would trust a record for only %s (sidecar.maxRecordLeaseDuration, ten times sidecar.leaseDuration %s by default): during the rollout a new standby could take the record over while an old holder still claims it. Set sidecar.maxRecordLeaseDuration to at least %s for this upgrade (a later one may unset it)" $oldLease (include "leader-sidecar-lib.durationText" $boundMs) $c.leaseDuration $oldLease) }}
{{- end }}
{{- if gt $leaseMs $oldBoundMs }}
{{- fail (printf "leader-sidecar-lib: sidecar.leaseDuration %s is longer than the running replicas trust a record for (%s: their max record lease duration, ten times their lease %s by default): during the rollout an old standby could take the record over while a new holder still claims it. Upgrade in two steps: first set sidecar.maxRecordLeaseDuration to at least %s with the lease unchanged, then the lease" $c.leaseDuration (include "leader-sidecar-lib.durationText" $oldBoundMs) $oldLease $c.leaseDuration) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Milliseconds (a number) as a duration: whole seconds as 150s, else 2500ms.
*/}}
{{- define "leader-sidecar-lib.durationText" -}}
{{- $ms := int64 (round . 0) }}
{{- if eq (mod $ms 1000) 0 }}{{ printf "%ds" (div $ms 1000) }}{{ else }}{{ printf "%dms" $ms }}{{ end }}
{{- end }}
