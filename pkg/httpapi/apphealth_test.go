package httpapi

import (
	"sync/atomic"
	"testing"
	"time"
)

// appHealthy is null without a check of the app, and the check's verdict
// at the moment of the answer with one.
func TestLeaderAnswersAppHealthy(t *testing.T) {
	f := newFake(leading(7, time.Minute))
	if st := decodeStrictly(t, serve(NewAppHandler(f, testInfo, Options{}), "GET", "/leader").Body.Bytes()); st.AppHealthy != nil {
		t.Fatalf("appHealthy %v without a check, want null", *st.AppHealthy)
	}
	var healthy atomic.Bool
	h := NewAppHandler(f, testInfo, Options{AppHealthy: healthy.Load})
	for _, want := range []bool{false, true, false} {
		healthy.Store(want)
		st := decodeStrictly(t, serve(h, "GET", "/leader").Body.Bytes())
		if st.AppHealthy == nil || *st.AppHealthy != want {
			t.Fatalf("appHealthy %v, want %v", st.AppHealthy, want)
		}
	}
}
