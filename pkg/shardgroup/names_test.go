package shardgroup

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Member record names are valid Lease names, whatever the identity
// (election.NewIdentity gives prefix_<uuid>).
func TestMemberRecordIsAValidLeaseName(t *testing.T) {
	for _, c := range []struct{ identity, want string }{
		{"web-0_4a5ff563-79ab-4820-b73e-dc9b7324884d", "g-member-web-0-4a5ff563-79ab-4820-b73e-dc9b7324884d"},
		{"Host.Example_1", "g-member-host.example-1"},
		{"a_", "g-member-ax"},
		{"é", "g-member--x"},
	} {
		got := MemberRecord("g", c.identity)
		if got != c.want {
			t.Errorf("MemberRecord(g, %q) = %q, want %q", c.identity, got, c.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("MemberRecord(g, %q) = %q: %v", c.identity, got, errs)
		}
	}
	if ShardRecord("g", 7) != "g-shard-7" {
		t.Errorf("ShardRecord(g, 7) = %q", ShardRecord("g", 7))
	}
}
