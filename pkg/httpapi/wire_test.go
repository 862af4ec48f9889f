package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// decodeStrictly decodes body as the shared wire type, refusing any field
// the type does not have: the server writes fence.LeaderJSON and nothing
// else.
func decodeStrictly(t *testing.T, body []byte) fence.LeaderJSON {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var st fence.LeaderJSON
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("%s is not fence.LeaderJSON: %v", body, err)
	}
	return st
}

// validForMs is validUntil as whole milliseconds from the moment of the
// answer, while leading; null otherwise.
func TestLeaderAnswersValidForMs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(leading(7, 10*time.Second))
		h := NewAppHandler(f, testInfo, Options{})
		for _, c := range []struct {
			after time.Duration
			want  int64
		}{{0, 10000}, {2500 * time.Millisecond, 7500}, {1500*time.Millisecond - time.Microsecond, 6000}, {5999 * time.Millisecond, 1}} {
			time.Sleep(c.after)
			st := decodeStrictly(t, serve(h, "GET", "/leader").Body.Bytes())
			if !st.Leader || st.ValidForMs == nil || *st.ValidForMs != c.want || st.ValidUntil == nil {
				t.Fatalf("validForMs %v, want %d (leader %v)", st.ValidForMs, c.want, st.Leader)
			}
			if got := time.Duration(*st.ValidForMs) * time.Millisecond; time.Now().Add(got).After(*st.ValidUntil) {
				t.Fatalf("now + validForMs (%v) is after validUntil %v", got, st.ValidUntil)
			}
		}
		time.Sleep(1001 * time.Microsecond)
		if st := decodeStrictly(t, serve(h, "GET", "/leader").Body.Bytes()); st.Leader || st.ValidForMs != nil || st.Token != nil {
			t.Fatalf("after validUntil: %+v, want a follower with null validForMs and token", st)
		}
	})
}

// GET /leader, a release, a hand-off and every /leader/watch event are
// the shared wire type with no other field.
func TestAnswersAreTheSharedWireType(t *testing.T) {
	for name, f := range map[string]*fakeElector{
		"leader":   newFake(leading(7, time.Minute)),
		"follower": newFake(following("other_2")),
	} {
		t.Run(name, func(t *testing.T) {
			want := f.Status()
			h := NewAppHandler(f, testInfo, Options{})
			st := decodeStrictly(t, serve(h, "GET", "/leader").Body.Bytes())
			if st.Leader != want.Leader || st.Identity != want.Identity || st.Holder != want.Holder ||
				st.Lease != testInfo.Lease || st.Backend != testInfo.Backend || st.Error != "" {
				t.Fatalf("GET /leader %+v for %+v", st, want)
			}
			if want.Leader && (st.Token == nil || *st.Token != want.Token || !st.ValidUntil.Equal(want.ValidUntil)) {
				t.Fatalf("GET /leader token %v validUntil %v, want %d and %v", st.Token, st.ValidUntil, want.Token, want.ValidUntil)
			}
			rec := serve(h, "POST", "/leader/release")
			if st := decodeStrictly(t, rec.Body.Bytes()); st.Leader || (rec.Code != 200) != (st.Error != "") {
				t.Fatalf("POST /leader/release: %d %+v", rec.Code, st)
			}
			rec = serve(h, "POST", "/leader/handoff") // a follower now: refused
			if st := decodeStrictly(t, rec.Body.Bytes()); st.Leader || rec.Code != 409 || st.Error == "" {
				t.Fatalf("POST /leader/handoff: %d %+v", rec.Code, st)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFake(leading(3, 20*time.Second))
		done := make(chan struct{})
		h := NewAppHandler(f, testInfo, Options{Done: done, KeepAlive: time.Hour})
		w := &streamWriter{header: http.Header{}}
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			h.ServeHTTP(w, httptest.NewRequest("GET", "/leader/watch", nil))
		}()
		synctest.Wait()
		f.Set(following("other_2"))
		synctest.Wait()
		close(done)
		<-finished
		events := strings.Split(strings.TrimSpace(w.String()), "\n\n")
		if len(events) != 2 {
			t.Fatalf("stream %q, want two events", w.String())
		}
		for _, e := range events {
			decodeStrictly(t, []byte(strings.TrimPrefix(e, "data: ")))
		}
	})
}
