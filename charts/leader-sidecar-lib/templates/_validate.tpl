{{/*
Render-time checks of the effective settings (leader-sidecar-lib.config
calls this with them): what the sidecar would refuse at start, or die of,
fails the render with a message that names the value, so a clean helm
install never crash-loops. Two kinds of check:
  - the chart's own: what the sidecar never sees (the image, the volume,
    the Lease object, native and waitForLeadership) or cannot check alone
    (its two listeners on one port pass its checks and clash at start);
  - mirrors of the sidecar's rules, each naming the Go function that is the
    source. e2e/chart/agreement_test.go runs every rendering
    through the binary's `sidecar check` and keeps the two equal.
*/}}
{{- define "leader-sidecar-lib.validate" -}}
{{- $c := . }}
{{- if and $c.image.digest (not (regexMatch "^sha256:[0-9a-f]{64}$" (toString $c.image.digest))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.image.digest must be sha256: and 64 hex digits, not %q" (toString $c.image.digest)) }}
{{- end }}
{{- if not (has $c.backend (list "lease" "sqlite" "postgres")) }}
{{- fail (printf "leader-sidecar-lib: sidecar.backend must be lease, sqlite or postgres, not %q" (toString $c.backend)) }}
{{- end }}
{{- /* The chart's own: the connection string's Secret, which the sidecar
never sees (it reads the variable the Secret fills). */}}
{{- if eq $c.backend "postgres" }}
{{- if and $c.postgres.existingSecret $c.postgres.url }}
{{- fail "leader-sidecar-lib: sidecar.postgres.existingSecret and sidecar.postgres.url exclude each other: give the connection string in one place" }}
{{- end }}
{{- if not (or $c.postgres.existingSecret $c.postgres.url) }}
{{- fail "leader-sidecar-lib: sidecar.backend postgres needs its connection string: sidecar.postgres.existingSecret (a Secret of the release's namespace with it under sidecar.postgres.key), or sidecar.postgres.url" }}
{{- end }}
{{- end }}
{{- if not (has $c.readiness.mode (list "none" "probe" "pod-condition" "label")) }}
{{- fail (printf "leader-sidecar-lib: sidecar.readiness.mode must be none, probe, pod-condition or label, not %q" (toString $c.readiness.mode)) }}
{{- end }}
{{- /* As sidecarConfig.check (cmd/sidecar/sidecar.go): validation.IsQualifiedName, with a prefix for the condition type. */}}
{{- if and (eq $c.readiness.mode "pod-condition") (not (and (include "leader-sidecar-lib.qualifiedName" $c.readiness.conditionType) (contains "/" (toString $c.readiness.conditionType)))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.readiness.conditionType must be a domain-qualified name such as leader-sidecar.io/leader, not %q" (toString $c.readiness.conditionType)) }}
{{- end }}
{{- if and (eq $c.readiness.mode "label") (not (include "leader-sidecar-lib.qualifiedName" $c.readiness.roleLabel)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.readiness.roleLabel must be a label key such as leader-sidecar.io/role, not %q" (toString $c.readiness.roleLabel)) }}
{{- end }}
{{- /* As electionConfig.check (cmd/sidecar/election.go): validation.IsDNS1123Subdomain. */}}
{{- if and $c.leaseName (gt (len (toString $c.leaseName)) 253) }}
{{- fail (printf "leader-sidecar-lib: sidecar.leaseName must be a lowercase RFC 1123 subdomain of at most 253 characters, not %d" (len (toString $c.leaseName))) }}
{{- end }}
{{- if and $c.leaseName (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" (toString $c.leaseName))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.leaseName must be a lowercase RFC 1123 subdomain (a-z, 0-9, - and .), not %q" (toString $c.leaseName)) }}
{{- end }}
{{- if $c.appHealth.url }}
{{- /* As appHealthConfig.check (cmd/sidecar/apphealth.go): an http(s) URL
(url.Parse, which urlParse is) with a host that httpapi.IsLoopbackHost
accepts, on a port number from 1 to 65535 that is none of the sidecar's
listeners' (compared as numbers). */}}
{{- $url := toString $c.appHealth.url }}
{{- $u := dict "scheme" "" "host" "" "hostname" "" }}
{{- if regexMatch "(?i)^https?://" $url }}
{{- $u = urlParse $url }}
{{- end }}
{{- if not (and (has $u.scheme (list "http" "https")) $u.host (include "leader-sidecar-lib.loopbackHost" $u.hostname)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.appHealth.url must be an http:// or https:// URL on loopback (127.0.0.0/8, [::1] or localhost): the app next to the sidecar, not %q" $url) }}
{{- end }}
{{- $port := regexFind ":[0-9]*$" $u.host | trimPrefix ":" | default (get (dict "http" "80" "https" "443") $u.scheme) }}
{{- if or (not (regexMatch "^[0-9]+$" $port)) (lt (atoi $port) 1) (gt (atoi $port) 65535) }}
{{- fail (printf "leader-sidecar-lib: sidecar.appHealth.url must name a port number from 1 to 65535, not %q" $url) }}
{{- end }}
{{- range $key := list "httpPort" "opsPort" }}
{{- if eq (atoi $port) (int (index $c $key)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.appHealth.url must not name a port of the sidecar's own (%s, sidecar.%s), not %q: give the app's health endpoint, never the sidecar's or the Pod's readiness" $port $key $url) }}
{{- end }}
{{- end }}
{{- if $c.waitForLeadership }}
{{- fail "leader-sidecar-lib: sidecar.appHealth.url and sidecar.waitForLeadership exclude each other: with waitForLeadership the app starts only once its replica leads, so it could never pass the health check that lets its replica lead" }}
{{- end }}
{{- $f := $c.appHealth.failures }}
{{- if not (and (or (kindIs "float64" $f) (kindIs "int64" $f) (kindIs "int" $f)) (ge (float64 $f) 1.0) (eq (float64 $f) (float64 (int64 $f)))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.appHealth.failures must be a whole number of at least 1, not %v" $f) }}
{{- end }}
{{- range $key := list "period" "timeout" }}
{{- $ms := include "leader-sidecar-lib.milliseconds" (list (printf "sidecar.appHealth.%s" $key) (index $c.appHealth $key)) | float64 }}
{{- if le $ms 0.0 }}
{{- fail (printf "leader-sidecar-lib: sidecar.appHealth.%s must be greater than 0, not %v" $key (index $c.appHealth $key)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $c.waitForLeadership (not $c.native) }}
{{- fail "leader-sidecar-lib: sidecar.waitForLeadership needs sidecar.native true: only a native sidecar's startupProbe holds the app back" }}
{{- end }}
{{- if and $c.lease.create (ne $c.backend "lease") }}
{{- fail (printf "leader-sidecar-lib: sidecar.lease.create is for sidecar.backend lease; the %s backend has no Lease" $c.backend) }}
{{- end }}
{{- if and (eq $c.backend "sqlite") (not (has $c.sqlite.volume.type (list "hostPath" "persistentVolumeClaim"))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sqlite.volume.type must be hostPath or persistentVolumeClaim, not %q" (toString $c.sqlite.volume.type)) }}
{{- end }}
{{- if and (eq $c.backend "sqlite") (eq $c.sqlite.volume.type "persistentVolumeClaim") (not $c.sqlite.volume.claimName) }}
{{- fail "leader-sidecar-lib: sidecar.sqlite.volume.claimName is required with sidecar.sqlite.volume.type persistentVolumeClaim" }}
{{- end }}

{{- /* Shard mode. As shardsConfig.check (cmd/sidecar/shards.go): --shards
from 0 to shard.MaxShards (256; the chart renders it only when enabled, and
takes 1 and up), the delays not negative, --shard-max-per-member not
negative, --shard-group a DNS subdomain; and with shards, readiness mode
none, no app health URL, release on shutdown. */}}
{{- if not (kindIs "map" $c.sharding) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding must be a map, not %v" $c.sharding) }}
{{- end }}
{{- $sh := $c.sharding }}
{{- if not (kindIs "bool" $sh.enabled) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding.enabled must be true or false, not %v" $sh.enabled) }}
{{- end }}
{{- $n := $sh.shards }}
{{- if not (and (or (kindIs "float64" $n) (kindIs "int64" $n) (kindIs "int" $n)) (eq (float64 $n) (float64 (int64 $n))) (ge (int64 $n) 1) (le (int64 $n) 256)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding.shards must be a whole number from 1 to 256, not %v" $n) }}
{{- end }}
{{- $m := $sh.maxPerMember }}
{{- if not (and (or (kindIs "float64" $m) (kindIs "int64" $m) (kindIs "int" $m)) (eq (float64 $m) (float64 (int64 $m))) (ge (int64 $m) 0)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding.maxPerMember must be a whole number from 0 (the fair share), not %v" $m) }}
{{- end }}
{{- range $key := list "rebalanceDelay" "drainTimeout" "stopDrainTimeout" }}
{{- if not (and (eq $key "stopDrainTimeout") (kindIs "invalid" (index $sh $key))) }}
{{- $_ := include "leader-sidecar-lib.milliseconds" (list (printf "sidecar.sharding.%s" $key) (index $sh $key)) }}
{{- end }}
{{- end }}
{{- $group := toString $sh.group }}
{{- if and $group (or (gt (len $group) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $group))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding.group must be a lowercase RFC 1123 subdomain (a-z, 0-9, - and .) of at most 253 characters, not %q" $group) }}
{{- end }}
{{- if $sh.enabled }}
{{- if ne $c.readiness.mode "none" }}
{{- fail (printf "leader-sidecar-lib: sidecar.readiness.mode %s publishes one leader; sidecar.sharding takes none" $c.readiness.mode) }}
{{- end }}
{{- if $c.appHealth.url }}
{{- fail "leader-sidecar-lib: sidecar.appHealth.url gates one election; sidecar.sharding does not take it" }}
{{- end }}
{{- /* As shardsConfig.check (cmd/sidecar/shards.go). */}}
{{- if and (kindIs "bool" $c.releaseOnShutdown) (not $c.releaseOnShutdown) }}
{{- fail "leader-sidecar-lib: a replica in shard mode always drains and releases its shards when it stops; sidecar.sharding does not take sidecar.releaseOnShutdown false" }}
{{- end }}
{{- /* The chart's own: what the sidecar cannot check alone. */}}
{{- if $c.waitForLeadership }}
{{- fail "leader-sidecar-lib: sidecar.waitForLeadership waits for one leader, and shard mode has none: the app would never start; sidecar.sharding does not take it" }}
{{- end }}
{{- if $c.lease.create }}
{{- fail "leader-sidecar-lib: sidecar.lease.create creates the single election's Lease; shard mode creates its own Leases: sidecar.sharding does not take it" }}
{{- end }}
{{- /* The member Lease <group>-member-<identity> (shardgroup.MemberRecord,
which --shard-group's check on the lease backend builds): the identity is
the Pod name, _ and 36 characters, and a Pod name a controller makes has at
most 63, so the group (the lease name by default) has at most 145. */}}
{{- $effective := $group | default (toString $c.leaseName) }}
{{- if and (eq $c.backend "lease") (gt (len $effective) 145) }}
{{- fail (printf "leader-sidecar-lib: sidecar.sharding.group (or sidecar.leaseName, its default) must have at most 145 characters with the lease backend, not %d: a member's Lease is named <group>-member-<Pod name>_<36 characters>, and Lease names have at most 253" (len $effective)) }}
{{- end }}
{{- end }}

{{- /* Timings: leaseDuration > renewDeadline > 1.2 x retryPeriod > 0. */}}
{{- $lease := include "leader-sidecar-lib.milliseconds" (list "sidecar.leaseDuration" $c.leaseDuration) | float64 }}
{{- $renew := include "leader-sidecar-lib.milliseconds" (list "sidecar.renewDeadline" $c.renewDeadline) | float64 }}
{{- $retry := include "leader-sidecar-lib.milliseconds" (list "sidecar.retryPeriod" $c.retryPeriod) | float64 }}
{{- if le $retry 0.0 }}
{{- fail (printf "leader-sidecar-lib: sidecar.retryPeriod must be greater than 0, not %s" $c.retryPeriod) }}
{{- end }}
{{- if le (mulf $renew 5) (mulf $retry 6) }}
{{- fail (printf "leader-sidecar-lib: sidecar.renewDeadline (%s) must be greater than 1.2 x sidecar.retryPeriod (%s)" $c.renewDeadline $c.retryPeriod) }}
{{- end }}
{{- if le $lease $renew }}
{{- fail (printf "leader-sidecar-lib: sidecar.leaseDuration (%s) must be greater than sidecar.renewDeadline (%s)" $c.leaseDuration $c.renewDeadline) }}
{{- end }}
{{- if ne (mod (int64 $lease) 1000) 0 | or (ne (float64 (int64 $lease)) $lease) }}
{{- fail (printf "leader-sidecar-lib: sidecar.leaseDuration must be a whole number of seconds (a Lease stores seconds), not %s" $c.leaseDuration) }}
{{- end }}
{{- /* renewInterval: "" for the sidecar's default, else > 0 and renewInterval + 1.2 x retryPeriod < renewDeadline. */}}
{{- if ne (toString $c.renewInterval) "" }}
{{- $interval := include "leader-sidecar-lib.milliseconds" (list "sidecar.renewInterval" $c.renewInterval) | float64 }}
{{- if le $interval 0.0 }}
{{- fail (printf "leader-sidecar-lib: sidecar.renewInterval must be greater than 0, not %s" $c.renewInterval) }}
{{- end }}
{{- if ge (addf (mulf $interval 5) (mulf $retry 6)) (mulf $renew 5) }}
{{- fail (printf "leader-sidecar-lib: sidecar.renewInterval (%s) must be less than sidecar.renewDeadline (%s) minus 1.2 x sidecar.retryPeriod (%s), so a failed renewal is retried before the leader stops claiming" $c.renewInterval $c.renewDeadline $c.retryPeriod) }}
{{- end }}
{{- end }}
{{- /* As shardsConfig.sizeKubeRate (cmd/sidecar/shards.go): in shard mode
on Leases a --kube-api-qps below 2 requests per shard per renew interval
cannot carry the shards. The chart has no value of its own for the rate: it
reads it where it can be given, sidecar.extraEnv (LEADER_SIDECAR_KUBE_API_QPS)
and sidecar.extraArgs (--kube-api-qps=V or --kube-api-qps V), which win, as
a flag wins over its variable. The renew interval is sidecar.renewInterval,
else election.DefaultRenewInterval: leaseDuration / 3, or half of
renewDeadline minus 1.2 x retryPeriod when that is less. */}}
{{- if and $c.sharding.enabled (eq $c.backend "lease") }}
{{- $qps := "" }}
{{- range $e := $c.extraEnv }}
{{- if and (kindIs "map" $e) (eq (toString $e.name) "LEADER_SIDECAR_KUBE_API_QPS") }}
{{- $qps = toString $e.value }}
{{- end }}
{{- end }}
{{- $valueNext := false }}
{{- range $a := $c.extraArgs }}
{{- $a = toString $a }}
{{- if $valueNext }}
{{- $qps = $a }}
{{- $valueNext = false }}
{{- else if hasPrefix "--kube-api-qps=" $a }}
{{- $qps = trimPrefix "--kube-api-qps=" $a }}
{{- else if eq $a "--kube-api-qps" }}
{{- $valueNext = true }}
{{- end }}
{{- end }}
{{- if regexMatch "^[0-9]+(\\.[0-9]*)?$" $qps }}
{{- $intervalMs := 0.0 }}
{{- if ne (toString $c.renewInterval) "" }}
{{- $intervalMs = include "leader-sidecar-lib.milliseconds" (list "sidecar.renewInterval" $c.renewInterval) | float64 }}
{{- else }}
{{- $room := subf $renew (mulf $retry 1.2) }}
{{- $intervalMs = divf $lease 3 }}
{{- if ge $intervalMs $room }}
{{- $intervalMs = divf $room 2 }}
{{- end }}
{{- end }}
{{- $shards := int64 $c.sharding.shards }}
{{- $least := divf (mulf 2 $shards 1000) $intervalMs }}
{{- if lt (float64 $qps) $least }}
{{- fail (printf "leader-sidecar-lib: --kube-api-qps %s (in sidecar.extraArgs or sidecar.extraEnv) cannot carry %d shards renewed every %vms: at least %.4g, 2 requests per shard per renew interval, are needed; leave it unset for %.4g" $qps $shards $intervalMs $least (mulf $least 1.5)) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* maxRecordLeaseDuration: "" for the sidecar's default, else at least leaseDuration. */}}
{{- if ne (toString $c.maxRecordLeaseDuration) "" }}
{{- $bound := include "leader-sidecar-lib.milliseconds" (list "sidecar.maxRecordLeaseDuration" $c.maxRecordLeaseDuration) | float64 }}
{{- if lt $bound $lease }}
{{- fail (printf "leader-sidecar-lib: sidecar.maxRecordLeaseDuration (%s) must be at least sidecar.leaseDuration (%s): a candidate trusts the records it writes itself" $c.maxRecordLeaseDuration $c.leaseDuration) }}
{{- end }}
{{- end }}

{{- /* awaitReplacement: "" (off), else as --await-replacement takes it. */}}
{{- if ne (toString $c.awaitReplacement) "" }}
{{- $await := include "leader-sidecar-lib.milliseconds" (list "sidecar.awaitReplacement" $c.awaitReplacement) | float64 }}
{{- $bound := mulf $lease 10 }}
{{- if ne (toString $c.maxRecordLeaseDuration) "" }}
{{- $bound = include "leader-sidecar-lib.milliseconds" (list "sidecar.maxRecordLeaseDuration" $c.maxRecordLeaseDuration) | float64 }}
{{- end }}
{{- if ne $await (floor $await) }}
{{- fail (printf "leader-sidecar-lib: sidecar.awaitReplacement (%s) must be a whole number of milliseconds" $c.awaitReplacement) }}
{{- end }}
{{- if gt $await $bound }}
{{- fail (printf "leader-sidecar-lib: sidecar.awaitReplacement (%s) is beyond the longest a standby leaves the Lease to a replacement, sidecar.maxRecordLeaseDuration (%vms; 10 x sidecar.leaseDuration by default)" $c.awaitReplacement $bound) }}
{{- end }}
{{- if and (gt $await 0.0) $c.sharding.enabled }}
{{- fail "leader-sidecar-lib: sidecar.awaitReplacement is not for shard mode, where a stopping replica drains and releases its shards" }}
{{- end }}
{{- /* releaseOnShutdown null is true for a native sidecar only (config). */}}
{{- $release := ternary (or $c.native $c.sharding.enabled) $c.releaseOnShutdown (kindIs "invalid" $c.releaseOnShutdown) }}
{{- if and (gt $await 0.0) (not $release) }}
{{- fail "leader-sidecar-lib: sidecar.awaitReplacement needs sidecar.releaseOnShutdown (null means true only for a native sidecar), which writes the release it leaves to the replacement" }}
{{- end }}
{{- end }}

{{- /* Ports: numbers, and two listeners never on one port. */}}
{{- range $key := list "httpPort" "opsPort" }}
{{- $p := index $c $key }}
{{- if not (and (or (kindIs "float64" $p) (kindIs "int64" $p) (kindIs "int" $p)) (eq (float64 $p) (float64 (int64 $p))) (ge (int64 $p) 1) (le (int64 $p) 65535)) }}
{{- fail (printf "leader-sidecar-lib: sidecar.%s must be a port number from 1 to 65535, not %v" $key $p) }}
{{- end }}
{{- end }}
{{- if eq (int64 $c.opsPort) (int64 $c.httpPort) }}
{{- fail (printf "leader-sidecar-lib: sidecar.opsPort (%v) must differ from sidecar.httpPort (%v): the sidecar listens on both" $c.opsPort $c.httpPort) }}
{{- end }}

{{- /* User and group ids: whole numbers from 0, or null (none set). */}}
{{- if not (kindIs "map" $c.securityContext) }}
{{- fail (printf "leader-sidecar-lib: sidecar.securityContext must be a map with runAsUser, runAsGroup and fsGroup, not %v" $c.securityContext) }}
{{- end }}
{{- range $key, $what := dict "runAsUser" "uid" "runAsGroup" "gid" "fsGroup" "gid" }}
{{- $id := index $c.securityContext $key }}
{{- if not (or (kindIs "invalid" $id) (and (or (kindIs "float64" $id) (kindIs "int64" $id) (kindIs "int" $id)) (eq (float64 $id) (float64 (int64 $id))) (ge (int64 $id) 0))) }}
{{- fail (printf "leader-sidecar-lib: sidecar.securityContext.%s must be a %s (a whole number from 0) or null, not %s" $key $what (toJson $id)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The duration (index . 1) in milliseconds; fails naming the setting (index
. 0) unless it is a Go duration such as 15s, 1m30s or 2500ms.
*/}}
{{- define "leader-sidecar-lib.milliseconds" -}}
{{- $key := index . 0 }}
{{- $v := index . 1 }}
{{- if not (and (kindIs "string" $v) (regexMatch "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" $v)) }}
{{- fail (printf "leader-sidecar-lib: %s must be a duration such as 15s or 1m30s, not %v" $key $v) }}
{{- end }}
{{- $unit := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1 "s" 1000 "m" 60000 "h" 3600000 }}
{{- $ms := 0.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" $v -1 }}
{{- $u := regexFind "(ns|us|µs|ms|s|m|h)$" . }}
{{- $ms = addf $ms (mulf (trimSuffix $u . | float64) (get $unit $u)) }}
{{- end }}
{{- $ms }}
{{- end }}

{{/*
"true" when the host (a URL's hostname: no brackets, the zone unescaped)
is loopback, else "": exactly httpapi.IsLoopbackHost (pkg/httpapi/loopback.go),
that is localhost in any case (strings.EqualFold), or an address that
netip.ParseAddr parses and whose Unmap is loopback: 127.0.0.0/8 in four
decimal fields without leading zeros, ::1 in any IPv6 spelling, or
::ffff:127.x.y.z (an IPv6 address may carry a non-empty %zone).
*/}}
{{- define "leader-sidecar-lib.loopbackHost" -}}
{{- $h := toString . }}
{{- $octet := "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])" }}
{{- $v4 := printf "%s\\.%s\\.%s\\.%s" $octet $octet $octet $octet }}
{{- $hex := "[0-9a-fA-F]{1,4}" }}
{{- /* EqualFold: the one other rune that folds to a letter of localhost is U+017F, a long s. */}}
{{- if eq (lower (replace "\u017f" "s" $h)) "localhost" }}true
{{- else if regexMatch "^[^.:%]*\\." $h }}
{{- /* netip.ParseAddr reads IPv4 when a dot comes before any colon. */}}
{{- if regexMatch (printf "^%s$" $v4) $h }}{{ if hasPrefix "127." $h }}true{{ end }}{{ end }}
{{- else if regexMatch "^[^.:%]*:" $h }}
{{- /* IPv6 (netip's parseIPv6): the zone after the first %, then 8 groups
of 1 to 4 hex digits, the last two of which may be an IPv4 address, and
one :: that stands for at least one group of zeros. */}}
{{- $ok := or (not (contains "%" $h)) (ne (regexReplaceAll "^[^%]*%" $h "") "") }}
{{- $addr := regexReplaceAll "%.*$" $h "" }}
{{- $parts := splitList "::" $addr }}
{{- $groups := list }}
{{- if eq (len $parts) 1 }}
{{- $ok = and $ok (or (regexMatch (printf "^(%s:){7}%s$" $hex $hex) $addr) (regexMatch (printf "^(%s:){6}%s$" $hex $v4) $addr)) }}
{{- if $ok }}{{ $groups = splitList ":" $addr }}{{ end }}
{{- else if eq (len $parts) 2 }}
{{- $left := index $parts 0 }}
{{- $right := index $parts 1 }}
{{- $ok = and $ok (regexMatch (printf "^(%s(:%s)*)?$" $hex $hex) $left) (regexMatch (printf "^((%s:)*(%s|%s))?$" $hex $hex $v4) $right) }}
{{- $l := list }}{{ if $left }}{{ $l = splitList ":" $left }}{{ end }}
{{- $r := list }}{{ if $right }}{{ $r = splitList ":" $right }}{{ end }}
{{- $n := add (len $l) (len $r) (ternary 1 0 (contains "." $right)) }}
{{- $ok = and $ok (le $n 7) }}
{{- if $ok }}
{{- $groups = $l }}
{{- range until (int (sub 8 $n)) }}{{ $groups = append $groups "0" }}{{ end }}
{{- $groups = concat $groups $r }}
{{- end }}
{{- else }}
{{- $ok = false }}
{{- end }}
{{- if $ok }}
{{- /* An IPv4 address at the end is two groups; each group normalized. */}}
{{- $last := last $groups }}
{{- if contains "." $last }}
{{- $o := splitList "." $last }}
{{- $groups = concat (initial $groups) (list (printf "%x" (add (mul (atoi (index $o 0)) 256) (atoi (index $o 1)))) (printf "%x" (add (mul (atoi (index $o 2)) 256) (atoi (index $o 3))))) }}
{{- end }}
{{- $norm := list }}
{{- range $groups }}{{ $norm = append $norm (lower . | trimPrefix "0" | trimPrefix "0" | trimPrefix "0" | default "0") }}{{ end }}
{{- $zeros := true }}
{{- range slice $norm 0 5 }}{{ if ne . "0" }}{{ $zeros = false }}{{ end }}{{ end }}
{{- if and $zeros (eq (index $norm 5) "0") (eq (index $norm 6) "0") (eq (index $norm 7) "1") }}true
{{- else if and $zeros (eq (index $norm 5) "ffff") (regexMatch "^7f[0-9a-f]{2}$" (index $norm 6)) }}true
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"true" when the name is a qualified name (a label key, a condition type),
else "": exactly validation.IsQualifiedName of k8s.io/apimachinery, that is
an optional prefix (a DNS subdomain, at most 253 characters) and a slash,
then a name of at most 63 characters.
*/}}
{{- define "leader-sidecar-lib.qualifiedName" -}}
{{- $parts := splitList "/" (toString .) }}
{{- $name := last $parts }}
{{- $nameOK := and (le (len $name) 63) (regexMatch "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$" $name) }}
{{- if eq (len $parts) 1 }}{{ if $nameOK }}true{{ end }}
{{- else if eq (len $parts) 2 }}
{{- $prefix := first $parts }}
{{- if and $nameOK (le (len $prefix) 253) (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $prefix) }}true{{ end }}
{{- end }}
{{- end }}
