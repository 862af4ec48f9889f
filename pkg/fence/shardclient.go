package fence

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Shards asks the sidecar GET /shards (shard mode, --shards N): the group,
// and the shards this replica holds with their tokens, states and ranges.
// An error (the sidecar does not answer, is not in shard mode, or answers
// something unusable) must be taken as "holds nothing". The answer is a
// hint like any other; a write is fenced by its guard (ShardTermID).
func (c *Client) Shards(ctx context.Context) (ShardsJSON, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/shards", nil)
	if err != nil {
		return ShardsJSON{}, fmt.Errorf("fence: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return ShardsJSON{}, fmt.Errorf("fence: asking the sidecar: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return ShardsJSON{}, fmt.Errorf("fence: reading GET %s: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return ShardsJSON{}, fmt.Errorf("%w: GET %s: status %s", ErrBadResponse, req.URL, resp.Status)
	}
	if len(body) > maxBody {
		return ShardsJSON{}, fmt.Errorf("%w: GET %s: answer larger than %d bytes", ErrBadResponse, req.URL, maxBody)
	}
	return decodeShards(body)
}

// Drained tells the sidecar that the application let go of the shard in
// the term id (ShardTerm.ID) (POST /shards/{i}/drained?token=N): the
// sidecar releases it at once if that term is the one that drains. Call
// it once no write of the term can still be under way: after the
// ShardTerm ended with ErrShardDraining and its work stopped. An error
// wrapping ErrBadResponse names the sidecar's answer (409: the shard does
// not drain here, e.g. it was undrained or already released, or it drains
// in another term than id's, so that a late acknowledgement of an earlier
// term never releases a later one).
func (c *Client) Drained(ctx context.Context, id ShardTermID) error {
	url := c.base + "/shards/" + strconv.Itoa(id.Shard) + "/drained?token=" + strconv.FormatInt(id.Token, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fence: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		var refusal struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &refusal)
		return fmt.Errorf("%w: POST %s: status %s: %s", ErrBadResponse, url, resp.Status, refusal.Error)
	}
	return nil
}

// decodeShards parses and checks one ShardsJSON; unknown fields are
// ignored, so that the sidecar can add fields.
func decodeShards(b []byte) (ShardsJSON, error) {
	var s ShardsJSON
	if err := json.Unmarshal(b, &s); err != nil {
		return ShardsJSON{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	switch {
	case s.Group == "" || s.Identity == "":
		return ShardsJSON{}, fmt.Errorf("%w: shards answer without a group or an identity", ErrBadResponse)
	case s.Shards < 1:
		return ShardsJSON{}, fmt.Errorf("%w: shards answer with %d shards", ErrBadResponse, s.Shards)
	}
	seen := make(map[int]bool, len(s.Held))
	for _, h := range s.Held {
		switch {
		case h.Shard < 0 || h.Shard >= s.Shards || seen[h.Shard]:
			return ShardsJSON{}, fmt.Errorf("%w: held shard %d of %d (or held twice)", ErrBadResponse, h.Shard, s.Shards)
		case h.Token < 1 || h.ValidUntil.IsZero():
			return ShardsJSON{}, fmt.Errorf("%w: held shard %d needs a token >= 1 and a validUntil", ErrBadResponse, h.Shard)
		case h.State != ShardHeld && h.State != ShardDraining:
			return ShardsJSON{}, fmt.Errorf("%w: held shard %d in state %q", ErrBadResponse, h.Shard, h.State)
		}
		seen[h.Shard] = true
	}
	return s, nil
}
