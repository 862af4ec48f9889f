package settest

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// quickClient asks the sidecars for the apps and the nemesis: a paused
// sidecar does not answer, and they do not wait for it long.
var quickClient = &http.Client{Timeout: 300 * time.Millisecond}

// ask is GET /leader of s with quickClient.
func ask(s *sidecartest.Sidecar) (sidecartest.State, error) {
	resp, err := quickClient.Get("http://" + s.Addr() + "/leader")
	if err != nil {
		return sidecartest.State{}, err
	}
	defer resp.Body.Close()
	var st sidecartest.State
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// worker is replica i's app until ctx ends. Every askEvery it asks its
// sidecar GET /leader; an answer replaces what it knows, but no answer (a
// paused or killed sidecar) leaves the last one in hand, as a slow app
// that trusts what it last heard would. While what it knows says leader,
// it appends with that term, one id after the other, 0-20 ms apart.
func (r *Run) worker(ctx context.Context, i int, rng *rand.Rand) {
	const askEvery = 500 * time.Millisecond
	var known *fence.TermID
	var asked time.Time
	for ctx.Err() == nil {
		if time.Since(asked) >= askEvery {
			asked = time.Now()
			if st, err := ask(r.slot(i)); err == nil {
				known = nil
				if st.Leader && st.Token != nil {
					known = &fence.TermID{Token: *st.Token, Holder: st.Identity}
				}
				r.mu.Lock()
				r.leads[i] = known != nil
				r.mu.Unlock()
			}
		}
		if known == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.appendOnce(i, *known, rng)
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the app's other work
	}
}

// appendOnce appends a fresh id to the list in term: in one transaction,
// the guard's check (unless the run is unguarded), the read of the list, a
// moment's work (0-10 ms), the write of the list with the id at the end,
// the commit.
func (r *Run) appendOnce(replica int, term fence.TermID, rng *rand.Rand) {
	o := op{replica: replica, id: r.nextID.Add(1), term: term, call: time.Since(r.began)}
	o.outcome = func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tx, err := r.c.DB.BeginTx(ctx, nil)
		if err != nil {
			return appendFailed
		}
		defer tx.Rollback()
		if r.guarded {
			if err := r.guard.Check(ctx, tx, "set", term); err != nil {
				if errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrTokenReused) {
					return appendRefused
				}
				return appendFailed
			}
		}
		var elems string
		if err := tx.QueryRowContext(ctx, `SELECT elems FROM `+r.c.Table+` WHERE k = 1`).Scan(&elems); err != nil {
			return appendFailed
		}
		list, err := parseList(elems)
		if err != nil {
			r.t.Errorf("the list's row: %v", err)
			return appendFailed
		}
		o.read = stateOf(list)
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
		if _, err := tx.ExecContext(ctx, `UPDATE `+r.c.Table+` SET elems = $1 WHERE k = 1`, formatList(append(list, o.id))); err != nil {
			return appendFailed
		}
		if err := tx.Commit(); err != nil {
			return appendUnknown
		}
		return appendOK
	}()
	o.ret = time.Since(r.began)
	r.mu.Lock()
	r.history = append(r.history, o)
	r.mu.Unlock()
}
