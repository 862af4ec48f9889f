//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExampleChartEventsAndMetrics checks what an operator watches: the
// leader's Pod has an Event saying it became leader with its token, and
// each sidecar's /metrics, scraped from its ops port by Pod IP (through the
// API server's Pod proxy), says leader_sidecar_is_leader 1 on the leader
// alone.
func TestExampleChartEventsAndMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods := installExample(t, ctx, ns, 3)
	var leaderPod string
	var token int64
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		st, pod, reason := oneLeader(ctx, ns, pods)
		if reason == "" {
			leaderPod, token = pod, *st.Token
		}
		return reason == "", reason
	})

	eventually(t, ctx, "an Event on the leader's Pod", func() (bool, string) {
		events, err := cl.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + leaderPod + ",reason=LeaderElection",
		})
		if err != nil {
			return false, err.Error()
		}
		want := fmt.Sprintf("with fencing token %d", token)
		var seen []string
		for _, e := range events.Items {
			if strings.Contains(e.Message, "became leader") && strings.Contains(e.Message, want) {
				return true, ""
			}
			seen = append(seen, e.Message)
		}
		return false, fmt.Sprintf("Events %q, want one that says became leader %s", seen, want)
	})

	eventually(t, ctx, "leader_sidecar_is_leader 1 on the leader alone", func() (bool, string) {
		for _, p := range pods {
			body, err := cl.client.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
				Name(p.Name + ":8081").SubResource("proxy").Suffix("metrics").DoRaw(ctx)
			if err != nil {
				return false, p.Name + ": " + err.Error()
			}
			got, ok := gauge(string(body), "leader_sidecar_is_leader")
			want := 0.0
			if p.Name == leaderPod {
				want = 1
			}
			if !ok || got != want {
				return false, fmt.Sprintf("%s: leader_sidecar_is_leader %v (found: %v), want %v", p.Name, got, ok, want)
			}
		}
		return true, ""
	})
}

// gauge is the value of the first sample of metric in a Prometheus text
// exposition.
func gauge(text, metric string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		name, rest, _ := strings.Cut(line, " ")
		if name != metric && !strings.HasPrefix(name, metric+"{") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		return v, err == nil
	}
	return 0, false
}
