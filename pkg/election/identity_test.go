package election

import "testing"

func TestIdentityPrefixUndoesNewIdentity(t *testing.T) {
	for _, prefix := range []string{"web-7d9f4-x2x7k", "my_app", "host.example.com", ""} {
		if got := IdentityPrefix(NewIdentity(prefix)); got != prefix {
			t.Errorf("IdentityPrefix(NewIdentity(%q)) = %q", prefix, got)
		}
	}
	for identity, want := range map[string]string{
		"":                 "",
		"web-0":            "web-0",
		"web-0_":           "web-0",
		"_9":               "",
		"a_b_c":            "a_b",
		"node-1_client-go": "node-1",
	} {
		if got := IdentityPrefix(identity); got != want {
			t.Errorf("IdentityPrefix(%q) = %q, want %q", identity, got, want)
		}
	}
}
