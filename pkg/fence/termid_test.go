package fence_test

import (
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

func TestTermIDString(t *testing.T) {
	cases := []struct {
		name string
		term fence.TermID
		want string
	}{
		{"with a holder", fence.TermID{Token: 7, Holder: "web-1_4f2a"}, `token 7 of "web-1_4f2a"`},
		{"without a holder (a row of an earlier version)", fence.TermID{Token: 7}, "token 7"},
		{"a holder to quote", fence.TermID{Token: 1, Holder: "a\"b\n"}, `token 1 of "a\"b\n"`},
		{"a huge holder", fence.TermID{Token: 2, Holder: strings.Repeat("h", 1<<20)},
			`token 2 of "` + strings.Repeat("h", 128) + `... (1048576 bytes)"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.term.String(); got != c.want {
				t.Fatalf("String() = %.300q, want %.300q", got, c.want)
			}
		})
	}
}
