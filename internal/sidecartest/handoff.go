package sidecartest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Handoff sends POST /leader/handoff to the sidecar, with the body
// {"to": to} unless to is empty, and returns the status code and the
// answer.
func (p *Proc) Handoff(to string) (int, State, error) {
	var body io.Reader
	if to != "" {
		b, err := json.Marshal(map[string]string{"to": to})
		if err != nil {
			return 0, State{}, err
		}
		body = bytes.NewReader(b)
	}
	resp, err := Client.Post("http://"+p.addr+"/leader/handoff", "application/json", body)
	if err != nil {
		return 0, State{}, err
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return resp.StatusCode, State{}, fmt.Errorf("POST /leader/handoff answered %s with a body that is not JSON: %w", resp.Status, err)
	}
	return resp.StatusCode, st, nil
}
