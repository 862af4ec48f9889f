{{/*
Settings of the sidecar. A chart that includes this library sets them under
`sidecar:` in its own values; anything it leaves out takes the default below
(false, 0 and "" given by the chart are kept, unlike sprig's merge).
*/}}
{{- define "leader-sidecar-lib.defaults" -}}
# Name of the sidecar container.
name: leader-sidecar
# The sidecar's image; the tag is the library's appVersion (hack/set-version.sh
# keeps them equal).
image:
  repository: ghcr.io/leader-sidecar/leader-sidecar
  tag: v0.1.0
  # sha256:...: the image is pulled by digest (repository@digest), the tag
  # is then only a label.
  digest: ""
  pullPolicy: IfNotPresent
# true: a native sidecar (Kubernetes 1.29+): rendered for initContainers with
# restartPolicy Always and a startupProbe, so the app starts once the sidecar
# answers and stops before it. false: a plain container next to the app,
# for clusters without native sidecars (1.25 to 1.28); rendering native
# for a cluster older than 1.29 fails.
native: true
# true: the app containers start only once this replica leads. The native
# sidecar's startupProbe asks /leader/ready, and the kubelet starts no app
# container before it passes, so a standby's Pod waits in PodInitializing.
# The app must still stop acting when its term ends: leadership can be lost
# after it started. Needs native: true; forces strategy Recreate.
waitForLeadership: false
# lease: a coordination.k8s.io/v1 Lease (any cluster). sqlite: one SQLite
# file, for kind and single-node clusters only (see sqlite below).
# postgres: one table in a PostgreSQL database (see postgres below).
backend: lease
# Name of the election (the Lease). Default: the release's full name.
leaseName: ""
lease:
  # true: the chart creates the (empty) Lease, and the Role does not grant
  # create on leases. false: the sidecar creates it on first start, which
  # needs create on every Lease of the namespace (RBAC cannot restrict
  # create by name).
  create: false
readiness:
  # none: Ready means healthy. probe: only the leader's Pod is Ready (its
  # readinessProbe is /leader/ready). pod-condition: only the leader's Pod
  # is Ready, through a readinessGate the sidecar sets. label: the sidecar
  # labels its Pod leader or follower; every Pod stays Ready.
  mode: none
  # The Pod condition of pod-condition mode (domain-qualified).
  conditionType: leader-sidecar.io/leader
  # The Pod label of label mode.
  roleLabel: leader-sidecar.io/role
# Election timings: leaseDuration > renewDeadline > 1.2 x retryPeriod.
leaseDuration: 15s
renewDeadline: 10s
retryPeriod: 2s
# How long after the start of its last successful renewal the leader renews
# again (a failed renewal is retried every retryPeriod). "": the sidecar's
# default, leaseDuration / 3 (5s). Must leave room for a retry:
# renewInterval + 1.2 x retryPeriod < renewDeadline.
renewInterval: ""
# The longest lease duration a record is trusted with: a record that
# declares more (a client with a bug, a hand edit) is waited out as this,
# and reported. "": the sidecar's default, 10 x leaseDuration. At least
# leaseDuration, and at least the longest leaseDuration of every
# candidate of the election.
maxRecordLeaseDuration: ""
appHealth:
  # The app's own health endpoint on loopback, e.g.
  # http://127.0.0.1:8080/healthz: while it fails, the replica neither leads
  # nor contends (a leader releases at once). "": no check.
  url: ""
  period: 2s
  # Checks in a row that flip the verdict, either way.
  failures: 3
  timeout: 1s
# Release the Lease on SIGTERM so a standby takes over at once. null: true
# for a native sidecar (it stops after the app), false for a plain container
# (it may stop before the app, which could still act as leader).
releaseOnShutdown: null
# Stopping as leader, release without a hand-off and leave the Lease for
# this long to this Pod's replacement (the same Pod name: a StatefulSet's)
# or to a Pod of another revision, so a StatefulSet's rollout moves
# leadership once. The election has no leader while the replacement starts,
# and up to this long when none comes (a scale-down). "": off. At most
# maxRecordLeaseDuration (10 x leaseDuration by default); needs
# releaseOnShutdown; not in shard mode.
awaitReplacement: ""
# On helm uninstall, release the Lease once its holder is gone, token kept,
# so a reinstall leads at once (lease backend, with rbac.create; in shard
# mode the shards' Leases): a post-delete hook Job of the sidecar's image runs
# `sidecar reset --backend lease --if-abandoned` under a ServiceAccount
# that may get and update those Leases only.
releaseOnUninstall: true
# Record Kubernetes Events on leadership changes (lease backend); false also
# drops events from the Role.
events: true
# While this replica leads, its Pod carries controller.kubernetes.io/pod-deletion-cost,
# so its ReplicaSet removes it last and a rollout moves leadership once
# (lease backend, not in shard mode); true also grants get and patch on pods
# in the Role.
podDeletionCost: true
# Shard mode (docs/shards.md): instead of one leader, the replicas split
# `shards` shards among them, each an election of its own with its own
# token; the app reads its shards from GET /shards. It takes readiness.mode
# none, no appHealth.url, no waitForLeadership and no lease.create, and
# releaseOnShutdown true (null is true here). With the lease backend the
# Role grants get, list, watch, create and update on every Lease of the
# namespace (the members' Leases are named after their Pods): run these
# Pods under a ServiceAccount of their own.
sharding:
  enabled: false
  # 1 to 256.
  shards: 8
  # Names the group's records, <group>-shard-<i> and <group>-member-<pod>.
  # Default: the lease name. With the lease backend at most 145 characters,
  # so that a member's Lease name fits with any Pod name (63).
  group: ""
  # How long a new replica must have been live before shards move to it.
  rebalanceDelay: 30s
  # How long a draining shard waits for the app's POST /shards/{i}/drained
  # before it is released anyway, while the replica runs.
  drainTimeout: 30s
  # The same wait for a replica that is stopping: it leaves the group,
  # then drains every shard it holds. 0s: it releases them at once.
  # null: 0s for a native sidecar, which the kubelet stops only after the
  # app containers have exited, so no app is left to acknowledge (a wait
  # would only delay the moves, and past terminationGracePeriodSeconds the
  # kubelet kills the sidecar and the shards wait for their leases to
  # expire); drainTimeout for a plain container, which stops beside an app
  # that may still run. With a wait, keep terminationGracePeriodSeconds
  # above stopDrainTimeout + renewDeadline.
  stopDrainTimeout: null
  # Most shards one replica contends for or holds; 0: its fair share,
  # ceil(shards / replicas).
  maxPerMember: 0
# The app API, on loopback only.
httpPort: 4040
# The read-only probes and metrics listener, on the Pod IP.
opsPort: 8081
logFormat: json
logLevel: info
# backend postgres: one table in a PostgreSQL database. The connection
# string (a postgres:// URL or key=value pairs, password included) comes
# from the Secret existingSecret (key), or from url, which the chart puts
# in a Secret of its own (<fullname>-postgres); give one of them.
postgres:
  existingSecret: ""
  key: url
  url: ""
  # The table's schema ("": the search_path's first) and name; the table
  # is created with its triggers if missing.
  schema: ""
  table: leader_records
  # auto, notify (LISTEN/NOTIFY) or poll (behind a transaction-mode pooler).
  signal: auto
sqlite:
  # Directory of the database file, mounted from the volume below.
  dir: /var/lib/leader-sidecar
  file: leader-sidecar.db
  volume:
    # hostPath: a directory on the node; every replica must run on that
    # one node, the directory must be writable by uid 65532, and Pod
    # Security "baseline" and "restricted" forbid hostPath volumes.
    # persistentVolumeClaim: an existing claim (claimName) on local,
    # ReadWriteOnce storage shared by the replicas on one node. Never a
    # network filesystem: SQLite's locks are not reliable there.
    type: hostPath
    hostPath: /var/lib/leader-sidecar
    claimName: ""
rbac:
  # Create the Role and RoleBinding with the least privilege the settings
  # above need.
  create: true
  # With create, where the Role grants patch on pods (the deletion cost,
  # label mode) and the cluster serves ValidatingAdmissionPolicy: a policy
  # (cluster-scoped) that lets the sidecar's ServiceAccount change only the
  # deletion cost annotation and the role label, and only on the Pod its
  # token is bound to (RBAC cannot name the Pod).
  podPatchPolicy: true
serviceAccount:
  # null: the library creates the ServiceAccount unless the including chart
  # has its own top-level serviceAccount values (as helm create makes them),
  # whose name it then uses. true or false overrides that.
  create: null
  # Default: the release's full name (create), else the chart's
  # serviceAccount.name. The namespace's "default" is never bound unless
  # named here or there.
  name: ""
  annotations: {}
# The user and group of the sidecar container, and of the Pod and app
# containers of a chart that uses leader-sidecar-lib.podSecurityContext and
# .containerSecurityContext (fsGroup: the Pod's only). Each a number, or
# null for none: the image's user (65532) applies, or the platform assigns
# one (OpenShift's restricted-v2 assigns a UID from the namespace's range
# and refuses a fixed one). runAsNonRoot stays true.
securityContext:
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
resources:
  requests:
    cpu: 10m
    memory: 32Mi
  limits:
    memory: 64Mi
# More environment variables and arguments of the sidecar container.
extraEnv: []
extraArgs: []
{{- end }}

{{/*
deepMergeKeep returns (as YAML) the map (index . 1) over the map (index . 0):
a key present in the second wins, even when its value is false, 0 or "";
maps are merged key by key; a null keeps the default.
*/}}
{{- define "leader-sidecar-lib.deepMergeKeep" -}}
{{- $defaults := index . 0 }}
{{- $given := index . 1 }}
{{- $out := dict }}
{{- range $k, $v := $defaults }}
{{- $g := index $given $k }}
{{- if or (not (hasKey $given $k)) (kindIs "invalid" $g) }}
{{- $_ := set $out $k $v }}
{{- else if and (kindIs "map" $v) (kindIs "map" $g) }}
{{- $_ := set $out $k (include "leader-sidecar-lib.deepMergeKeep" (list $v $g) | fromYaml) }}
{{- else }}
{{- $_ := set $out $k $g }}
{{- end }}
{{- end }}
{{- range $k, $g := $given }}
{{- if not (hasKey $defaults $k) }}
{{- $_ := set $out $k $g }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The effective settings, as YAML: `include "leader-sidecar-lib.config" . |
fromYaml`. Fails with a message naming the value when a setting is invalid
(the example chart's values.schema.json says the same earlier).
*/}}
{{- define "leader-sidecar-lib.config" -}}
{{- $defaults := include "leader-sidecar-lib.defaults" . | fromYaml }}
{{- $given := .Values.sidecar | default dict }}
{{- if not (kindIs "map" $given) }}
{{- fail "leader-sidecar-lib: .Values.sidecar must be a map" }}
{{- end }}
{{- $c := include "leader-sidecar-lib.deepMergeKeep" (list $defaults $given) | fromYaml }}
{{- /* A null the chart gives for an id removes it (deepMergeKeep keeps the default for other nulls). */}}
{{- with $given.securityContext }}
{{- if kindIs "map" . }}
{{- range $key := list "runAsUser" "runAsGroup" "fsGroup" }}
{{- if and (hasKey $given.securityContext $key) (kindIs "invalid" (index $given.securityContext $key)) }}
{{- $_ := set $c.securityContext $key nil }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- include "leader-sidecar-lib.validate" $c }}
{{- if and $c.native (not (semverCompare ">=1.29.0-0" .Capabilities.KubeVersion.Version)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.native true needs Kubernetes 1.29 or later (native sidecar containers), and the cluster is %s: set sidecar.native=false to run the sidecar as a plain container" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- if kindIs "invalid" $c.sharding.stopDrainTimeout }}
{{- /* A native sidecar stops after the app: nothing can acknowledge. */}}
{{- $_ := set $c.sharding "stopDrainTimeout" (ternary "0s" $c.sharding.drainTimeout $c.native) }}
{{- end }}
{{- if kindIs "invalid" $c.releaseOnShutdown }}
{{- /* Shard mode always drains and releases its shards when it stops. */}}
{{- $_ := set $c "releaseOnShutdown" (or $c.native $c.sharding.enabled) }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/*
"true" when only the leader's Pod is Ready (readiness mode probe or
pod-condition) or only the leader's app runs (waitForLeadership), else "".
*/}}
{{- define "leader-sidecar-lib.leaderOnlyReadiness" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if or (has $c.readiness.mode (list "probe" "pod-condition")) $c.waitForLeadership }}true{{ end }}
{{- end }}

{{/*
"true" when the sidecar talks to the Kubernetes API (lease backend, or a
readiness mode that writes the Pod), else "".
*/}}
{{- define "leader-sidecar-lib.needsKubeAPI" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if or (eq $c.backend "lease") (has $c.readiness.mode (list "pod-condition" "label")) }}true{{ end }}
{{- end }}
