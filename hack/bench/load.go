package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// loadResult is one load-generator run.
type loadResult struct {
	Requests int
	Errors   int
	RPS      float64
	P50, P99 time.Duration
}

// load sends GETs to url from conc workers for d (after a short warm-up).
func load(url string, conc int, d time.Duration) loadResult {
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxIdleConns: conc, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	warm := time.Now().Add(d / 10)
	end := warm.Add(d)
	lats := make([][]time.Duration, conc)
	errs := make([]int, conc)
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				resp, err := client.Get(url)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if t0.Before(warm) {
					continue
				}
				if err != nil {
					errs[w]++
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	r := loadResult{}
	for w := range lats {
		all = append(all, lats[w]...)
		r.Errors += errs[w]
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r.Requests = len(all)
	r.RPS = float64(len(all)) / d.Seconds()
	r.P50, r.P99 = pct(all, 50), pct(all, 99)
	return r
}

// pct is the nearest-rank percentile of sorted samples.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
