#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, for the tests that run
# the product as Pods:
#
#   kubeconfig=$(hack/cluster.sh up | tail -1)   # start (idempotent), wait for the node
#   hack/cluster.sh kubeconfig                   # print the kubeconfig's path
#   hack/cluster.sh down                         # stop it and remove every trace
#   hack/cluster.sh exec CMD...                  # run CMD inside the node, e.g.
#     hack/cluster.sh exec ctr -n k8s.io tasks ls   # (ctr finds containerd)
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and containerd (runc, a bridge CNI network) all run in a network
# namespace of their own (ip netns NETNS) and a private mount namespace whose
# /var and /run are directories of the state directory, so the host's
# interfaces, routes, iptables, /var and /run are never touched. The one
# thing on the host's side is a forwarder, 127.0.0.1:PORT to the API
# server in the namespace (socat), so kubectl and helm work from any shell
# with the printed kubeconfig. Every process runs in cgroups named
# /NETNS-node, which `down` empties and removes.
#
# Binaries come from hack/cluster-binaries.sh (kubectl too) and
# hack/envtest-binaries.sh, images (the sidecar, the example app, the Pod
# sandbox) from hack/cluster-images.sh, imported into containerd at every
# `up`. Cold, the builds take minutes; warm, `up` takes seconds.
#
# Environment: LEADER_SIDECAR_CLUSTER_STATE (state directory, default
# ~/.cache/leader-sidecar/cluster-state), LEADER_SIDECAR_CLUSTER_NETNS
# (leader-sidecar), LEADER_SIDECAR_CLUSTER_PORT (16443),
# LEADER_SIDECAR_CLUSTER_TIMEOUT (seconds to wait for the node, 180).
set -euo pipefail

hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state=${LEADER_SIDECAR_CLUSTER_STATE:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/cluster-state}
NETNS=${LEADER_SIDECAR_CLUSTER_NETNS:-leader-sidecar}
PORT=${LEADER_SIDECAR_CLUSTER_PORT:-16443}
TIMEOUT=${LEADER_SIDECAR_CLUSTER_TIMEOUT:-180}
CGROUP_NAME=$NETNS-node   # /CGROUP_NAME in every hierarchy, the node's cgroup namespace
NODE_NAME=leader-sidecar-node
NODE_IP=10.213.0.2        # on a veth whose both ends are in the namespace
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1      # the kubernetes Service
kubeconfig=$state/kubeconfig
log() { echo "cluster: $*" >&2; }

usage() { echo "usage: hack/cluster.sh up | down | kubeconfig | exec CMD..." >&2; exit 2; }

# Every v1 hierarchy and the unified one, as mounted on this machine.
hierarchies() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts; }

# cgroup_dir HIERARCHY: the node's cgroup in it, /CGROUP_NAME, the root of
# the node's cgroup namespace.
cgroup_dir() { echo "$1/$CGROUP_NAME"; }

# The node's cgroups: as recorded by `up`, else as this shell would make them.
node_cgroups() {
  if [[ -f $state/cgroups ]]; then cat "$state/cgroups"; return; fi
  local mnt
  for mnt in $(hierarchies); do cgroup_dir "$mnt"; done
}

# Kills every process in the node's cgroups (the daemons, the shims and the
# containers), then removes the cgroups, deepest first.
kill_cgroups() {
  local d pids round dirs
  dirs=$(node_cgroups)
  for round in TERM KILL KILL KILL KILL; do
    pids=$(for d in $dirs; do
      [[ ! -d $d ]] || find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true
    done | sort -u)
    [[ -z $pids ]] && break
    # A frozen cgroup (a paused container) must thaw to die.
    for d in $dirs; do
      [[ -d $d ]] && find "$d" -name freezer.state -exec sh -c 'for f; do echo THAWED >"$f"; done' _ {} + 2>/dev/null || true
    done
    kill -s "$round" $pids 2>/dev/null || true
    sleep 1
  done
  for d in $dirs; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d $d ]] && log "cannot remove cgroup $d"
  done
  return 0
}

down() {
  if [[ -f $state/forward.pid ]]; then
    kill -- "-$(cat "$state/forward.pid")" 2>/dev/null || true # socat and its children
  fi
  kill_cgroups
  # Processes that left the cgroups (none should) still hold the namespace.
  if ip netns list | awk '{ print $1 }' | grep -qx "$NETNS"; then
    local pids
    pids=$(ip netns pids "$NETNS" || true)
    [[ -n $pids ]] && { kill -KILL $pids 2>/dev/null || true; sleep 1; }
    ip netns delete "$NETNS"
  fi
  if [[ -d $state ]]; then
    # The node's mounts lived in its own mount namespace, gone with its
    # processes; anything still mounted below the state directory is a bug.
    if awk -v s="$state/" 'index($2 "/", s) == 1' /proc/self/mounts | grep -q .; then
      log "mounts left below $state:"; awk -v s="$state/" 'index($2 "/", s) == 1 { print $2 }' /proc/self/mounts >&2
      awk -v s="$state/" 'index($2 "/", s) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount -l
    fi
    rm -rf "$state"
  fi
  log "down"
}

api_ready() { "$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; }
node_ready() {
  [[ "$("$bin/kubectl" --kubeconfig "$kubeconfig" get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every half second.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if ! kill -0 "$(cat "$state/node.pid")" 2>/dev/null; then
      log "the node stopped while waiting for $what:"; tail -5 "$state/logs/node.log" >&2
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "timed out waiting for $what; logs in $state/logs; hack/cluster.sh down removes it"
      return 1
    fi
    sleep 0.5
  done
}

# node_exec CMD...: runs CMD in the node's network, mount and cgroup
# namespaces, with the cluster's binaries first on PATH.
node_exec() {
  PATH="$(cat "$state/bin"):$PATH" CONTAINERD_ADDRESS=/run/containerd/containerd.sock \
    nsenter --target "$(cat "$state/node.pid")" --net --mount --cgroup -- "$@"
}

import_images() {
  local images=$1
  log "importing $(paste -sd' ' "${images%.tar}.txt")"
  if ! node_exec "$bin/ctr" --address /run/containerd/containerd.sock -n k8s.io \
    images import "$images" >"$state/logs/import.log" 2>&1; then
    cat "$state/logs/import.log" >&2
    return 1
  fi
}

up() {
  bin=$("$hack/cluster-binaries.sh" | tail -1)
  envtest=$(nice -n 19 "$hack/envtest-binaries.sh" | tail -1) # niced: the machine runs tests too
  images=$("$hack/cluster-images.sh" | tail -1)
  for tool in socat openssl nsenter unshare ip; do
    command -v "$tool" >/dev/null && continue
    [[ $tool == socat && $(id -u) == 0 ]] && command -v apt-get >/dev/null || { log "needs $tool on PATH"; exit 1; }
    log "installing socat (apt-get install)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq socat >/dev/null
  done

  if [[ -f $state/node.pid ]] && kill -0 "$(cat "$state/node.pid")" 2>/dev/null && api_ready && node_ready; then
    log "already up"
    import_images "$images"
    echo "$kubeconfig"
    return
  fi
  [[ -e $state ]] || ip netns list | awk '{ print $1 }' | grep -qx "$NETNS" && { log "cleaning up a previous cluster"; down; }

  local start=$SECONDS
  mkdir -p "$state"/{pki,logs,conf,node/var/lib,node/var/log,node/run}
  ln -sfn /run "$state/node/var/run"
  certificates
  configs
  echo "$bin" >"$state/bin"

  log "network namespace $NETNS, node $NODE_NAME at $NODE_IP"
  ip netns add "$NETNS"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" link add node0 type veth peer name node1 # both ends inside
  ip -n "$NETNS" link set node1 up
  ip -n "$NETNS" addr add "$NODE_IP/32" dev node0
  ip -n "$NETNS" link set node0 up
  ip -n "$NETNS" route add default dev node0

  local mnt d
  for mnt in $(hierarchies); do
    d=$(cgroup_dir "$mnt")
    [[ -d $d ]] && { log "cgroup $d exists: a cluster with netns $NETNS runs from another state directory"; exit 1; }
    mkdir -p "$d"
    if [[ -f $mnt/cpuset.cpus ]]; then # a new cpuset has no CPUs until told
      cat "$mnt/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$mnt/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
  local cgroups=()
  for mnt in $(hierarchies); do cgroups+=("$(cgroup_dir "$mnt")"); done
  printf '%s\n' "${cgroups[@]}" >"$state/cgroups"

  # The cgroup hierarchies as the node sees them: mounted again inside its
  # cgroup namespace, so that their root is the node's cgroup.
  local cgroup_mounts
  cgroup_mounts=$(awk '$3 == "cgroup" || $3 == "cgroup2" {
    n = split($4, o, ","); opts = ""
    for (i = 1; i <= n; i++) if (o[i] !~ /^(rw|ro|relatime|noatime|nosuid|nodev|noexec)$/) opts = opts "," o[i]
    if ($3 == "cgroup" && opts ~ /^,name=[^,]*$/) opts = ",none" opts
    printf "mkdir -p %s && mount -t %s -o nosuid,nodev,noexec%s cgroup %s\n", $2, $3, opts, $2
  }' /proc/self/mounts)

  # The node's init: joins the node's cgroups and enters a cgroup namespace
  # rooted there (the runtime's /k8s.io/<id> cgroups land below it), makes
  # its mounts private, starts the daemons and waits for them.
  cat >"$state/node.sh" <<NODE
#!/usr/bin/env bash
set -euo pipefail
if [[ \${1:-} != inner ]]; then
  for d in ${cgroups[*]}; do echo \$\$ >"\$d/cgroup.procs"; done
  exec unshare --cgroup -- "\$0" inner
fi
mount --make-rslave /
mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup /sys/fs/cgroup
$cgroup_mounts
mount --bind "$state/node/var" /var
mount --bind "$state/node/run" /run
mkdir -p /run/netns /var/lib/kubelet /var/log/pods /var/tmp
mount --bind /var/lib/kubelet /var/lib/kubelet
mount --make-rshared /var/lib/kubelet
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
export PATH="$bin:\$PATH"
run() { local name=\$1; shift; "\$@" >"$state/logs/\$name.log" 2>&1 & echo \$! >"$state/\$name.pid"; }
run etcd "$envtest/etcd" --data-dir /var/lib/etcd --name node \\
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \\
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \\
  --initial-cluster node=http://127.0.0.1:2380 --unsafe-no-fsync
run kube-apiserver "$envtest/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \\
  --bind-address 0.0.0.0 --secure-port 6443 --advertise-address $NODE_IP \\
  --service-cluster-ip-range $SERVICE_CIDR --allow-privileged=true \\
  --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \\
  --client-ca-file "$state/pki/ca.crt" --token-auth-file "$state/pki/tokens.csv" \\
  --authorization-mode RBAC --service-account-issuer https://kubernetes.default.svc.cluster.local \\
  --service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \\
  --kubelet-preferred-address-types InternalIP
run containerd containerd --config "$state/conf/containerd.toml"
run kube-controller-manager kube-controller-manager --kubeconfig "$state/conf/component.kubeconfig" \\
  --leader-elect=false --bind-address 127.0.0.1 --root-ca-file "$state/pki/ca.crt" \\
  --service-account-private-key-file "$state/pki/sa.key" --use-service-account-credentials=false \\
  --controllers '*,-nodeipam'
run kube-scheduler kube-scheduler --kubeconfig "$state/conf/component.kubeconfig" \\
  --leader-elect=false --bind-address 127.0.0.1
until [[ -S /run/containerd/containerd.sock ]]; do sleep 0.2; done
run kubelet kubelet --config "$state/conf/kubelet.yaml" --kubeconfig "$state/conf/component.kubeconfig" \\
  --hostname-override $NODE_NAME --node-ip $NODE_IP --v=1
run kube-proxy kube-proxy --config "$state/conf/kube-proxy.yaml"
wait
NODE
  chmod +x "$state/node.sh"
  # Not `ip netns exec`: it mounts a sysfs of its own, without the cgroup
  # hierarchies the kubelet and runc need.
  setsid nsenter --net="/run/netns/$NETNS" -- unshare --mount --propagation slave -- \
    "$state/node.sh" </dev/null >"$state/logs/node.log" 2>&1 9<&- &
  echo $! >"$state/node.pid"

  # The host's side: 127.0.0.1:PORT, forwarded into the namespace.
  setsid socat -lpforward TCP-LISTEN:"$PORT",bind=127.0.0.1,reuseaddr,fork \
    EXEC:"nsenter --net=/run/netns/$NETNS socat STDIO TCP\:127.0.0.1\:6443" \
    </dev/null >"$state/logs/forward.log" 2>&1 9<&- &
  echo $! >"$state/forward.pid"

  wait_for 60 "the API server" api_ready
  wait_for 30 "containerd" node_exec test -S /run/containerd/containerd.sock
  import_images "$images"
  wait_for "$TIMEOUT" "node $NODE_NAME to be Ready" node_ready
  log "up in $((SECONDS - start))s"
  echo "$kubeconfig"
}

# certificates writes a CA, the API server's serving certificate, the
# service account key pair and static tokens: every component authenticates
# with a token of group system:masters (a test cluster on its own network).
certificates() {
  local pki=$state/pki
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
      -subj /CN=leader-sidecar-cluster-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out apiserver.crt \
      -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' \
        "IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local") 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    local admin component
    admin=$(openssl rand -hex 16) component=$(openssl rand -hex 16)
    printf '%s,admin,admin,"system:masters"\n%s,system:node:%s,node,"system:masters,system:nodes"\n' \
      "$admin" "$component" "$NODE_NAME" >tokens.csv
    echo "$admin" >admin.token
    echo "$component" >component.token
  )
}

# kubeconfig_for SERVER TOKEN
kubeconfig_for() {
  cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: leader-sidecar
  cluster:
    server: $1
    certificate-authority-data: $(base64 -w0 "$state/pki/ca.crt")
users:
- name: leader-sidecar
  user:
    token: $2
contexts:
- name: leader-sidecar
  context: {cluster: leader-sidecar, user: leader-sidecar}
current-context: leader-sidecar
KUBECONFIG
}

configs() {
  local conf=$state/conf
  kubeconfig_for "https://127.0.0.1:$PORT" "$(cat "$state/pki/admin.token")" >"$kubeconfig"
  kubeconfig_for https://127.0.0.1:6443 "$(cat "$state/pki/component.token")" >"$conf/component.kubeconfig"
  chmod 600 "$kubeconfig" "$conf/component.kubeconfig"

  mkdir -p "$conf/cni"
  cat >"$conf/cni/10-bridge.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "leader-sidecar",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI

  cat >"$conf/containerd.toml" <<TOML
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$(sed -n 3p "${images%.tar}.txt")"

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  disable_apparmor = true
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj would fail in runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$bin/cni"]
    conf_dir = "$conf/cni"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
TOML

  # cgroup v1 and no CAP_SYS_RESOURCE: no QoS cgroups, no node allocatable
  # enforcement; image garbage collection off (there is no registry to pull
  # an image back from).
  cat >"$conf/kubelet.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: $NODE_IP
readOnlyPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
podCIDR: $POD_CIDR
KUBELET

  cat >"$conf/kube-proxy.yaml" <<PROXY
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $conf/component.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
PROXY
}

# One `up` or `down` at a time: they lock this script (no file is left).
exec 9<"${BASH_SOURCE[0]}"
case ${1:-} in
up) flock 9 && up ;;
down) flock 9 && down ;;
kubeconfig)
  [[ -f $kubeconfig ]] || { log "no cluster: run hack/cluster.sh up"; exit 1; }
  echo "$kubeconfig"
  ;;
exec)
  shift
  (($#)) || usage
  [[ -f $state/node.pid ]] && kill -0 "$(cat "$state/node.pid")" 2>/dev/null || { log "no cluster: run hack/cluster.sh up"; exit 1; }
  exec 9<&-
  node_exec "$@"
  ;;
*) usage ;;
esac
