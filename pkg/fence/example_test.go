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

	// The resource checks the token with each write.
	var billing fence.MemoryGuard
	err = billing.Do("nightly-run", term.Token(), func() error { return nil })
	fmt.Println("write with token 4:", err)

	// The sidecar steps down (its renewals failed, say): the term ends at once.
	elector.Set(following(""))
	<-term.Done()
	fmt.Println("term over:", errors.Is(term.Err(), fence.ErrLeadershipLost))

	// A newer leader writes; a late write of this term is refused.
	_ = billing.Do("nightly-run", 5, func() error { return nil })
	err = billing.Do("nightly-run", term.Token(), func() error { return nil })
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStaleToken))
	// Output:
	// leading with token 4
	// write with token 4: <nil>
	// term over: true
	// late write refused: true
}

// Replica A (token 1) was paused and woke up after B (token 2) took over and
// wrote. A's write is checked in its own transaction and refused.
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

	write := func(token int64, value string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if err := guard.Check(ctx, tx, "daily-report", token); err != nil {
			return err // fence.ErrStaleToken: a newer leader has written
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO reports (name, value) VALUES ('daily', $1)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, value)
		if err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("B, token 2:", write(2, "B's fresh value"))
	err = write(1, "A's stale value")
	fmt.Println("A, token 1, refused:", errors.Is(err, fence.ErrStaleToken))

	var value string
	if err := db.QueryRow(`SELECT value FROM reports WHERE name = 'daily'`).Scan(&value); err != nil {
		log.Fatal(err)
	}
	fmt.Println("report:", value)
	// Output:
	// B, token 2: <nil>
	// A, token 1, refused: true
	// report: B's fresh value
}

func ExampleMemoryGuard() {
	var cache fence.MemoryGuard
	warm := func(token int64) error {
		return cache.Do("cache", token, func() error {
			fmt.Println("warming with token", token)
			return nil
		})
	}
	fmt.Println(warm(7))
	fmt.Println(warm(7)) // the same term again
	fmt.Println(errors.Is(warm(6), fence.ErrStaleToken))
	// Output:
	// warming with token 7
	// <nil>
	// warming with token 7
	// <nil>
	// true
}
