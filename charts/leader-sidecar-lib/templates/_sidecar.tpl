{{/*
Pod-level pieces for the Deployment (or StatefulSet) that runs the sidecar.
Each takes the root context. A typical Pod template:

  spec:
    serviceAccountName: {{ include "leader-sidecar-lib.serviceAccountName" . }}
    automountServiceAccountToken: false
    {{- with include "leader-sidecar-lib.readinessGates" . }}
    readinessGates:
      {{- . | nindent 6 }}
    {{- end }}
    {{- with include "leader-sidecar-lib.initContainers" . }}
    initContainers:
      {{- . | nindent 6 }}
    {{- end }}
    containers:
      - name: app
        ...
      {{- include "leader-sidecar-lib.containers" . | nindent 6 }}
    {{- with include "leader-sidecar-lib.volumes" . }}
    volumes:
      {{- . | nindent 6 }}
    {{- end }}
*/}}

{{/*
The Pod securityContext of Pod Security "restricted": non-root (uid and gid
65532, the distroless nonroot user), seccomp RuntimeDefault.
*/}}
{{- define "leader-sidecar-lib.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The container securityContext of Pod Security "restricted": no privilege
escalation, every capability dropped, read-only root filesystem. The
example chart gives it to its app container too.
*/}}
{{- define "leader-sidecar-lib.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The sidecar container (one container, not a list item).
*/}}
{{- define "leader-sidecar-lib.container" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- $mode := $c.readiness.mode -}}
name: {{ $c.name }}
image: {{ include "leader-sidecar-lib.imageRef" $c.image | quote }}
imagePullPolicy: {{ $c.image.pullPolicy }}
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
The sidecar as a list item for initContainers when it is a native sidecar,
else nothing.
*/}}
{{- define "leader-sidecar-lib.initContainers" -}}
{{- $c := include "leader-sidecar-lib.config" . | fromYaml }}
{{- if $c.native -}}
- {{ include "leader-sidecar-lib.container" . | trim | nindent 2 | trim }}
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
The Pod's volumes (list items): the SQLite directory with the sqlite
backend; the ServiceAccount token when the sidecar talks to the API server
(what the kubelet would automount: token, ca.crt, namespace), mounted by
the sidecar container alone; else nothing.
*/}}
{{- define "leader-sidecar-lib.volumes" -}}
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
releases the Lease on the way out) and cannot stall. Otherwise the strategy
is `strategy` from the chart's values, else RollingUpdate.
*/}}
{{- define "leader-sidecar-lib.strategy" -}}
{{- if include "leader-sidecar-lib.leaderOnlyReadiness" . -}}
type: Recreate
{{- else if .Values.strategy -}}
{{ toYaml .Values.strategy }}
{{- else -}}
type: RollingUpdate
{{- end }}
{{- end }}
