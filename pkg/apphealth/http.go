package apphealth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// httpCheck returns a check that GETs rawURL: healthy on a status from 200
// to 399, as a Kubernetes httpGet probe. Redirects are not followed (a 3xx
// is already a success), and the body is drained and dropped.
func httpCheck(rawURL string) (func(context.Context) error, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("apphealth: URL %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("apphealth: URL %q must be http:// or https:// with a host", rawURL)
	}
	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", u.Redacted(), err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 399 {
			return fmt.Errorf("GET %s: status %d", u.Redacted(), resp.StatusCode)
		}
		return nil
	}, nil
}
