package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// The examples run the sidecar's real app API (httpapi.NewAppHandler) on a
// loopback port, with an elector they script. In a Pod, the sidecar is at
// fence.DefaultBaseURL: fence.NewClient("").

func ExampleClient_State() {
	elector := newElector(leading(3, time.Minute))
	sidecar := httptest.NewServer(httpapi.NewAppHandler(elector, info, httpapi.Options{}))
	defer sidecar.Close()

	c, err := fence.NewClient(sidecar.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()

	// Before each unit of exclusive work: an error means "not leader".
	s, err := c.State(context.Background())
	if err != nil || !s.Leader {
		fmt.Println("not leader: skip the work")
		return
	}
	fmt.Println("leader; attach token", s.Token, "to every write")
	// Output: leader; attach token 3 to every write
}

func ExampleClient_WaitForLeadership() {
	elector := newElector(following("app-1_2"))
	sidecar := httptest.NewServer(httpapi.NewAppHandler(elector, info, httpapi.Options{}))
	defer sidecar.Close()
	c, err := fence.NewClient(sidecar.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()
	go elector.Set(leading(4, time.Minute)) // meanwhile, this replica wins

	term, err := c.WaitForLeadership(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer term.Close()
	fmt.Println("leading with token", term.Token())

	// The resource checks the term (token and holder) with each write.
	var billing fence.MemoryGuard
	err = billing.Do("nightly-run", term.ID(), func() error { return nil })
	fmt.Println("write with token 4:", err)

	// The sidecar steps down (its renewals failed, say): the term ends at once.
	elector.Set(following(""))
	<-term.Done()
	fmt.Println("term over:", errors.Is(term.Err(), fence.ErrLeadershipLost))

	// A newer leader writes; a late write of this term is refused.
	_ = billing.Do("nightly-run", fence.TermID{Token: 5, Holder: "app-1_2"}, func() error { return nil })
	err = billing.Do("nightly-run", term.ID(), func() error { return nil })
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStaleToken))
	// Output:
	// leading with token 4
	// write with token 4: <nil>
	// term over: true
	// late write refused: true
}

// Replica A (token 1) was paused and woke up after B (token 2) took over and
// wrote. A's write is checked in its own transaction and refused. C was
// handed token 2 again by a store that was reset: refused too, since token 2
// is B's here.
func ExampleSQLGuard() {
	dir, err := os.MkdirTemp("", "fence-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	guard, err := fence.NewSQLGuard("") // table fence_tokens
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.EnsureTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE reports (name TEXT PRIMARY KEY, value TEXT)`); err != nil {
		log.Fatal(err)
	}

	write := func(term fence.TermID, value string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if err := guard.Check(ctx, tx, "daily-report", term); err != nil {
			return err // fence.ErrStaleToken: a newer leader has written
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO reports (name, value) VALUES ('daily', $1)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, value)
		if err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("B, token 2:", write(fence.TermID{Token: 2, Holder: "B"}, "B's fresh value"))
	err = write(fence.TermID{Token: 1, Holder: "A"}, "A's stale value")
	fmt.Println("A, token 1, refused:", errors.Is(err, fence.ErrStaleToken))
	err = write(fence.TermID{Token: 2, Holder: "C"}, "C's value")
	fmt.Println("C, token 2 again, refused:", errors.Is(err, fence.ErrTokenReused))

	var value string
	if err := db.QueryRow(`SELECT value FROM reports WHERE name = 'daily'`).Scan(&value); err != nil {
		log.Fatal(err)
	}
	fmt.Println("report:", value)
	// Output:
	// B, token 2: <nil>
	// A, token 1, refused: true
	// C, token 2 again, refused: true
	// report: B's fresh value
}

func ExampleMemoryGuard() {
	var cache fence.MemoryGuard
	warm := func(term fence.TermID) error {
		return cache.Do("cache", term, func() error {
			fmt.Println("warming with", term)
			return nil
		})
	}
	fmt.Println(warm(fence.TermID{Token: 7, Holder: "web-1_a"}))
	fmt.Println(warm(fence.TermID{Token: 7, Holder: "web-1_a"})) // the same term again
	fmt.Println(errors.Is(warm(fence.TermID{Token: 6, Holder: "web-2_b"}), fence.ErrStaleToken))
	fmt.Println(errors.Is(warm(fence.TermID{Token: 7, Holder: "web-2_b"}), fence.ErrTokenReused))
	// Output:
	// warming with token 7 of "web-1_a"
	// <nil>
	// warming with token 7 of "web-1_a"
	// <nil>
	// true
	// true
}
