package statusview

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// -o json: every field under its name, times in RFC 3339, ages in seconds
// by the observer's clock, null where there is nothing.
func TestRowJSON(t *testing.T) {
	e := heldAt("billing", "billing-0_x", 12, 90*time.Second, 1500*time.Millisecond)
	e.Record.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: "billing-0_x", To: "billing-1", Token: 12}
	data, err := json.Marshal(List{Elections: []Row{RowOf(e, observed), RowOf(Election{Name: "local", Version: "1"}, observed)}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"elections":[` +
		`{"namespace":"shop","name":"billing","holder":"billing-0_x","token":12,` +
		`"acquireTime":"2026-12-02T11:58:30Z","renewTime":"2026-12-02T11:59:58.5Z","leaseDurationSeconds":15,` +
		`"termAgeSeconds":90,"sinceRenewalSeconds":1.5,` +
		`"handoff":{"phase":"offer","from":"billing-0_x","to":"billing-1","token":12,"pending":true},` +
		`"state":"held","stale":false,"claimFrom":null,"version":"42","observedAt":"2026-12-02T12:00:00Z"},` +
		`{"name":"local","holder":"","token":0,"acquireTime":null,"renewTime":null,"leaseDurationSeconds":0,` +
		`"termAgeSeconds":null,"sinceRenewalSeconds":null,"handoff":null,"state":"released","stale":false,"claimFrom":null,"version":"1",` +
		`"observedAt":"2026-12-02T12:00:00Z"}]}`
	if string(data) != want {
		t.Fatalf("json:\n%s\nwant:\n%s", data, want)
	}
}
