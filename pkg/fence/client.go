package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	// DefaultBaseURL is where the sidecar serves its app API by default.
	DefaultBaseURL = "http://127.0.0.1:4040"
	// DefaultTimeout bounds each GET /leader of the default HTTP client.
	DefaultTimeout = 2 * time.Second
	// DefaultIdleTimeout is how long a watch stream may stay silent (no
	// event, no keep-alive comment) before it counts as broken: three of
	// the sidecar's 15s keep-alive periods.
	DefaultIdleTimeout = 45 * time.Second

	maxBody = 64 << 10 // largest answer or event accepted
)

// Client talks to the sidecar's app API. It is safe for concurrent use.
//
// A Client remembers the highest term (token and identity) it has
// delivered through State, Watch or WaitForLeadership, and never delivers
// a leader state whose term does not follow it: a lower token, or the same
// token with another identity, is delivered as not leader with an Err
// wrapping ErrTokenRegressed. Only a replaced or reset store hands out such
// terms; this Client leads again once the sidecar reports a higher token.
type Client struct {
	base       string
	hc         *http.Client // GET /leader, with a timeout
	stream     *http.Client // GET /leader/watch: no overall timeout
	idle       time.Duration
	backoffMin time.Duration
	backoffMax time.Duration
	delivered  delivered
	shards     shardsDelivered
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client use hc. Its Timeout bounds GET /leader;
// watch streams use a copy without the Timeout (they are bounded by the idle
// timeout instead). Default: its own transport, no proxy, DefaultTimeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithIdleTimeout sets how long a watch stream may stay silent before it is
// dropped and reconnected. Default DefaultIdleTimeout.
func WithIdleTimeout(d time.Duration) Option { return func(c *Client) { c.idle = d } }

// WithReconnectBackoff sets the wait before reconnecting a broken watch
// stream: first at first, doubling on each failure up to limit, back to
// first once a stream delivers a state. Default 100ms and 5s.
func WithReconnectBackoff(first, limit time.Duration) Option {
	return func(c *Client) { c.backoffMin, c.backoffMax = first, limit }
}

// NewClient returns a Client for the sidecar at baseURL ("" means
// DefaultBaseURL), e.g. "http://127.0.0.1:4040".
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("fence: base URL %q: want http://host:port", baseURL)
	}
	c := &Client{
		base:       strings.TrimSuffix(baseURL, "/"),
		idle:       DefaultIdleTimeout,
		backoffMin: 100 * time.Millisecond,
		backoffMax: 5 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	switch {
	case c.idle <= 0:
		return nil, errors.New("fence: idle timeout must be > 0")
	case c.backoffMin <= 0 || c.backoffMax < c.backoffMin:
		return nil, errors.New("fence: reconnect backoff: want 0 < first <= limit")
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // the sidecar is next door; never through a proxy
		c.hc = &http.Client{Transport: tr, Timeout: DefaultTimeout}
	}
	stream := *c.hc
	stream.Timeout = 0
	c.stream = &stream
	return c, nil
}

// CloseIdleConnections closes the Client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// State is the sidecar's answer to GET /leader.
type State struct {
	// Leader is true if this replica may act as leader now.
	Leader bool
	// Identity is the sidecar's candidate identity, unique per process
	// start; while Leader, it and Token name the term (see TermID).
	Identity string
	// Holder is the identity the store names as holder, as last seen.
	Holder string
	// Token is the fencing token of the term; 0 unless Leader.
	Token int64
	// ValidUntil is when the claim lapses unless renewed; zero unless Leader.
	ValidUntil time.Time
	// Lease names what is elected; Backend names the store.
	Lease, Backend string
	// Err is set only on states the client makes up, which never lead: the
	// state Watch delivers when its stream to the sidecar broke (wrapping
	// ErrDisconnected: leadership cannot be confirmed), and a leader state
	// refused because its term does not follow one this Client has
	// delivered (wrapping ErrTokenRegressed; Identity and Holder are the
	// sidecar's, Token is 0, and the error names both terms).
	Err error
}

// TermID is the term this state leads in: Token and Identity. It is the
// zero TermID unless Leader.
func (s State) TermID() TermID {
	if !s.Leader {
		return TermID{}
	}
	return TermID{Token: s.Token, Holder: s.Identity}
}

// State asks the sidecar whether this replica leads now. An error (the
// sidecar does not answer, or answers something unusable) must be taken as
// "not leader". A leader answer whose term does not follow one this Client
// has delivered returns a not-leader State and its Err, which wraps
// ErrTokenRegressed, on every call until the sidecar's token passes.
func (c *Client) State(ctx context.Context) (State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/leader", nil)
	if err != nil {
		return State{}, fmt.Errorf("fence: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return State{}, fmt.Errorf("fence: asking the sidecar: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return State{}, fmt.Errorf("%w: GET %s: status %s", ErrBadResponse, req.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return State{}, fmt.Errorf("fence: reading GET %s: %w", req.URL, err)
	}
	if len(body) > maxBody {
		return State{}, fmt.Errorf("%w: GET %s: answer larger than %d bytes", ErrBadResponse, req.URL, maxBody)
	}
	s, err := decodeState(body)
	if err != nil {
		return State{}, err
	}
	s = c.admit(s)
	return s, s.Err
}

// decodeState parses and checks one LeaderJSON; unknown fields are
// ignored, so that the sidecar can add fields.
func decodeState(b []byte) (State, error) {
	var w struct {
		LeaderJSON
		// Leader shadows LeaderJSON.Leader to tell a missing field from
		// false.
		Leader *bool `json:"leader"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return State{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if w.Leader == nil {
		return State{}, fmt.Errorf("%w: no \"leader\" field", ErrBadResponse)
	}
	s := State{Leader: *w.Leader, Identity: w.Identity, Holder: w.Holder, Lease: w.Lease, Backend: w.Backend}
	if !s.Leader {
		return s, nil
	}
	if w.Token == nil || *w.Token < 1 || w.ValidUntil == nil || w.ValidUntil.IsZero() || w.Identity == "" {
		return State{}, fmt.Errorf("%w: a leader needs a token >= 1, a validUntil and an identity", ErrBadResponse)
	}
	s.Token, s.ValidUntil = *w.Token, *w.ValidUntil
	return s, nil
}
