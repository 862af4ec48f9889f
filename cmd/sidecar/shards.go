package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// shardsConfig is shard mode (package shardgroup): N shards, each an
// election of its own, spread over the replicas; count 0 is the single
// election.
type shardsConfig struct {
	count int
	// group is --shard-group; check makes "" the lease name.
	group          string
	rebalanceDelay time.Duration
	drainTimeout   time.Duration
	// stopDrainTimeout is --shard-stop-drain-timeout; check makes it
	// --shard-drain-timeout when neither the flag nor its variable is
	// given.
	stopDrainTimeout time.Duration
	maxPerMember     int
	// memberOwner is --shard-member-owner: pod or none.
	memberOwner string
	// set tells --shard-stop-drain-timeout given from its default.
	set *pflag.FlagSet
}

// The values of --shard-member-owner.
const (
	memberOwnerPod  = "pod"
	memberOwnerNone = "none"
)

func (c *shardsConfig) add(fs *pflag.FlagSet) {
	c.set = fs
	fs.IntVar(&c.count, "shards", 0, "run a shard group of this many shards (1 to 256), each an election of its own, spread over the replicas; 0: one leader")
	docMeaning(fs, "shards", "shard mode: this many shards (1 to 256), each an election of its own with its own token, spread over the replicas; `0` is one leader (see [Shards](shards.md))")
	fs.StringVar(&c.group, "shard-group", "", "name of the shard group, which names its records (default: --lease-name)")
	docDefault(fs, "shard-group", "`--lease-name`")
	docMeaning(fs, "shard-group", "name of the shard group; its records are `<group>-shard-<i>` and `<group>-member-<identity>`")
	fs.DurationVar(&c.rebalanceDelay, "shard-rebalance-delay", shardgroup.DefaultRebalanceDelay, "how long a new member must have been live before shards held by others are drained towards it")
	docMeaning(fs, "shard-rebalance-delay", "how long a new member must have been live before shards held by others are drained towards it")
	fs.DurationVar(&c.drainTimeout, "shard-drain-timeout", shardgroup.DefaultDrainTimeout, "how long a draining shard waits for the app's POST /shards/{i}/drained before it is released anyway")
	docMeaning(fs, "shard-drain-timeout", "how long a draining shard waits for the app's `POST /shards/{i}/drained` before it is released anyway")
	fs.DurationVar(&c.stopDrainTimeout, "shard-stop-drain-timeout", 0, "how long a stopping replica waits for the app to acknowledge each draining shard before it releases it; 0: it releases every shard at once after leaving the membership, for an app that has stopped first (a native sidecar) (default: --shard-drain-timeout)")
	docDefault(fs, "shard-stop-drain-timeout", "`--shard-drain-timeout`")
	docMeaning(fs, "shard-stop-drain-timeout", "how long a stopping replica waits for the app to acknowledge each draining shard before it releases it; `0`: it releases every shard at once after leaving the membership, for an app that has stopped before the sidecar (a native sidecar is stopped after its Pod's app containers, so nothing acknowledges; the charts set `0`)")
	fs.IntVar(&c.maxPerMember, "shard-max-per-member", 0, "most shards this replica contends for or holds; 0: its fair share, ceil(shards/members)")
	docDefault(fs, "shard-max-per-member", "`0` (the fair share)")
	docMeaning(fs, "shard-max-per-member", "most shards this replica contends for or holds; `0`: the fair share, ceil(shards / members), which a replica may exceed while others join")
	fs.StringVar(&c.memberOwner, "shard-member-owner", memberOwnerPod, "pod: on the lease backend, this replica's member Lease is owned by its Pod ($POD_NAME and $POD_UID), so it is deleted with the Pod; none: no owner")
	docMeaning(fs, "shard-member-owner", "`pod`: on the `lease` backend, the member Lease this replica creates names its Pod (`$POD_NAME`, `$POD_UID`, when both are set and `$POD_NAMESPACE` is the Lease's namespace) as its owner, so Kubernetes' garbage collector deletes it with the Pod; `none`: no owner")
}

// enabled reports shard mode.
func (c *shardsConfig) enabled() bool { return c.count > 0 }

// check checks the shard flags against the resolved sidecar settings:
// shard mode neither publishes leadership on the Pod nor gates on the
// app's health (one leader's features), and always leaves the group on a
// graceful stop.
func (c *shardsConfig) check(cfg *sidecarConfig) error {
	if c.count < 0 || c.count > shard.MaxShards {
		return fmt.Errorf("--shards: must be from 0 (one leader) to %d, got %d", shard.MaxShards, c.count)
	}
	if c.rebalanceDelay < 0 {
		return fmt.Errorf("--shard-rebalance-delay: must not be negative, got %v", c.rebalanceDelay)
	}
	if c.drainTimeout < 0 {
		return fmt.Errorf("--shard-drain-timeout: must not be negative, got %v", c.drainTimeout)
	}
	if c.set == nil || !c.set.Changed("shard-stop-drain-timeout") {
		c.stopDrainTimeout = c.drainTimeout
	} else if c.stopDrainTimeout < 0 {
		return fmt.Errorf("--shard-stop-drain-timeout: must not be negative, got %v", c.stopDrainTimeout)
	}
	if c.maxPerMember < 0 {
		return fmt.Errorf("--shard-max-per-member: must not be negative, got %d", c.maxPerMember)
	}
	if c.memberOwner != memberOwnerPod && c.memberOwner != memberOwnerNone {
		return fmt.Errorf("--shard-member-owner: must be %s or %s, got %q", memberOwnerPod, memberOwnerNone, c.memberOwner)
	}
	if c.group == "" {
		c.group = cfg.election.leaseName
	} else if errs := validation.IsDNS1123Subdomain(c.group); len(errs) > 0 {
		return fmt.Errorf("--shard-group: %q is not a valid name: %s", c.group, strings.Join(errs, "; "))
	}
	if !c.enabled() {
		return nil
	}
	switch {
	case cfg.readiness != podreadiness.ModeNone:
		return fmt.Errorf("--shards: --readiness-mode %s publishes one leader; shard mode takes none", cfg.readiness)
	case cfg.appHealth.url != "":
		return errors.New("--shards: --app-health-url gates one election; shard mode does not take it")
	case !cfg.releaseOnShutdown:
		return errors.New("--shards: a replica in shard mode always drains and releases its shards when it stops; it does not take --release-on-shutdown=false")
	}
	if cfg.election.backend == "lease" {
		if err := c.sizeKubeRate(&cfg.election); err != nil {
			return err
		}
		for _, n := range []struct{ name, shown string }{
			{shardgroup.ShardRecord(c.group, c.count-1), shardgroup.ShardRecord(c.group, c.count-1)},
			{shardgroup.MemberRecord(c.group, cfg.election.identity), shardgroup.MemberPrefix(c.group) + "<identity>"},
		} {
			if errs := validation.IsDNS1123Subdomain(n.name); len(errs) > 0 {
				return fmt.Errorf("--shard-group: the group's Lease %s would not be a valid name: %s", n.shown, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// A shard group on Leases renews every shard it holds once a renew
// interval, and one replica may hold them all (the others gone, or at
// start, before it sees them), each first read, then created or written.
// The election client's rate is therefore sized by the shard count:
// shardRequestsPerRenewal requests per shard per renew interval unless
// --kube-api-qps is given, and no fewer than minShardRequestsPerRenewal
// when it is.
const (
	shardRequestsPerRenewal    = 3
	minShardRequestsPerRenewal = 2
)

// sizeKubeRate sets the election client's rate and burst from the shard
// count and the renew interval unless --kube-api-qps and --kube-api-burst
// are given: shardRequestsPerRenewal requests per shard per renew
// interval, and a burst of one request per shard, never below the single
// election's defaults. A rate given below minShardRequestsPerRenewal per
// shard per renew interval cannot carry the shards and is refused: the
// requests would wait in the client past their deadlines, the member
// records would not be written, each replica would see itself alone and
// contend for every shard, and no shard would be held.
func (c *shardsConfig) sizeKubeRate(el *electionConfig) error {
	perSecond := func(requests int) float32 {
		return float32(float64(requests*c.count) / el.renewInterval.Seconds())
	}
	given := func(flag string) bool { return el.set != nil && el.set.Changed(flag) }
	if !given("kube-api-qps") {
		el.kube.qps = max(kubeclient.DefaultQPS, perSecond(shardRequestsPerRenewal))
	} else if least := perSecond(minShardRequestsPerRenewal); el.kube.qps < least {
		return fmt.Errorf("--kube-api-qps: %v cannot carry %d shards renewed every %v (--renew-interval): at least %.4g, %d requests per shard per renew interval, "+
			"are needed; leave it unset for %.4g", el.kube.qps, c.count, el.renewInterval, least, minShardRequestsPerRenewal, perSecond(shardRequestsPerRenewal))
	}
	if !given("kube-api-burst") {
		el.kube.burst = max(kubeclient.DefaultBurst, c.count)
	}
	return nil
}

// settings are sidecar check's lines of shard mode; el is the resolved
// election (its backend and Pod).
func (c *shardsConfig) settings(el *electionConfig) []setting {
	count := strconv.Itoa(c.count)
	if !c.enabled() {
		count = "0 (one leader)"
	}
	maxPer := strconv.Itoa(c.maxPerMember)
	if c.maxPerMember == 0 {
		maxPer = "0 (the fair share)"
	}
	return []setting{
		{"shards", count},
		{"shard-group", c.group},
		{"shard-rebalance-delay", c.rebalanceDelay.String()},
		{"shard-drain-timeout", c.drainTimeout.String()},
		{"shard-stop-drain-timeout", c.stopDrainTimeout.String()},
		{"shard-max-per-member", maxPer},
		{"shard-member-owner", c.memberOwnerSetting(el)},
	}
}

// memberOwnerSetting says what --shard-member-owner does with el: the
// owner the member Lease will name, or why none. The Lease's namespace,
// unless --namespace gives it, is known only once the store is opened.
func (c *shardsConfig) memberOwnerSetting(el *electionConfig) string {
	switch {
	case c.memberOwner == memberOwnerNone:
		return memberOwnerNone
	case el.backend != "lease":
		return memberOwnerPod + " (no owner on the " + el.backend + " backend)"
	}
	namespace := el.kube.namespace
	if namespace == "" {
		namespace = el.pod.namespace
	}
	if _, why := el.pod.ownerIn(namespace); why != "" {
		return memberOwnerPod + " (no owner: " + why + ")"
	}
	return fmt.Sprintf("%s (the Pod %s/%s, uid %s)", memberOwnerPod, el.pod.namespace, el.pod.name, el.pod.uid)
}
