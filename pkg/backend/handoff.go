package backend

import (
	"encoding/json"
	"fmt"
	"time"
)

// HandoffPhase is the step a planned hand-off has reached (see package
// election for the protocol).
type HandoffPhase string

// The phases of a planned hand-off, in the order they are written.
const (
	// HandoffOffer: the leader (From, still the holder) offers leadership
	// to To, or to any candidate when To is empty, at its token.
	HandoffOffer HandoffPhase = "offer"
	// HandoffAccept: candidate To accepts the offer of From at Token; the
	// record still names From as holder.
	HandoffAccept HandoffPhase = "accept"
	// HandoffTransfer: From has stopped claiming and written To as holder
	// with the new token, Token.
	HandoffTransfer HandoffPhase = "transfer"
	// HandoffReserve: From, stopping, released the record at Token and
	// leaves it for Wait to its own replacement (a candidate whose Pod
	// name is To) or to a candidate of a revision other than Revision;
	// anyone else takes it only once it has stood Wait. It is carried by
	// a record in the release shape only. Sidecars that predate it read
	// it as no marker, and take the release at once.
	HandoffReserve HandoffPhase = "reserve"
)

// MaxReserveWait is the longest Wait a reserve marker carries.
const MaxReserveWait = time.Hour

// Handoff is the marker of a planned hand-off in a Record. The zero value
// means none. Backends store it as they find it; only package election
// gives it meaning, and every record it writes sets or clears it.
type Handoff struct {
	Phase HandoffPhase
	// From is the identity of the leader handing off.
	From string
	// To is the candidate: in an offer, an identity, a Pod name (an
	// identity's prefix) or "" for anyone; in an accept or a transfer,
	// the full identity of the candidate that accepted.
	To string
	// Token is the leader's token in an offer or an accept, and the new
	// holder's token in a transfer.
	Token int64
	// Revision, in an offer, is the offering leader's revision (its Pod's
	// pod-template-hash or controller-revision-hash; "" if unknown): an
	// offer to anyone is taken first by a candidate of another revision.
	// In a reserve, the stopping leader's revision.
	Revision string
	// Wait, in a reserve, is how long the record is left to the stopping
	// leader's replacement or another revision; zero otherwise.
	Wait time.Duration
}

// IsZero reports whether h is no marker at all.
func (h Handoff) IsZero() bool { return h == Handoff{} }

// check returns an error if h is not a marker the election writes.
func (h Handoff) check() error {
	switch h.Phase {
	case "":
		if !h.IsZero() {
			return fmt.Errorf("hand-off marker %+v has no phase", h)
		}
		return nil
	case HandoffOffer, HandoffAccept, HandoffTransfer:
		if h.Wait != 0 {
			return fmt.Errorf("hand-off marker %+v: only a reserve waits", h)
		}
	case HandoffReserve:
		if h.Wait <= 0 || h.Wait > MaxReserveWait || h.Wait%time.Millisecond != 0 {
			return fmt.Errorf("reserve marker wait %v out of range (0, %v] in whole milliseconds", h.Wait, MaxReserveWait)
		}
	default:
		return fmt.Errorf("hand-off marker has an unknown phase %q", h.Phase)
	}
	if h.From == "" {
		return fmt.Errorf("hand-off marker %+v names no leader", h)
	}
	if h.Token < 0 || h.Token > MaxTransitions {
		return fmt.Errorf("hand-off marker token %d out of range [0, %d]", h.Token, MaxTransitions)
	}
	return nil
}

// handoffJSON is the stored form of a marker: compact JSON, one key per
// field.
type handoffJSON struct {
	Phase HandoffPhase `json:"phase"`
	From  string       `json:"from"`
	To    string       `json:"to"`
	Token int64        `json:"token"`
	// Revision is left out when empty: a marker without one reads as
	// before, by sidecars of every release.
	Revision string `json:"revision,omitempty"`
	// WaitMs, a reserve's Wait in milliseconds, is left out elsewhere.
	WaitMs int64 `json:"waitMs,omitempty"`
}

// EncodeHandoff is the text a backend stores for h: "" for no marker, else
// compact JSON such as {"phase":"offer","from":"a_1","to":"","token":7,"revision":"7d9f5c"}.
func EncodeHandoff(h Handoff) string {
	if h.IsZero() {
		return ""
	}
	b, err := json.Marshal(handoffJSON{Phase: h.Phase, From: h.From, To: h.To, Token: h.Token,
		Revision: h.Revision, WaitMs: h.Wait.Milliseconds()})
	if err != nil { // a struct of strings and ints always encodes
		return ""
	}
	return string(b)
}

// DecodeHandoff reads what EncodeHandoff wrote. Text that is empty, not
// such JSON, or not a marker the election writes (edited by hand, say)
// reads as no marker: a marker only ever adds a way to hand over, so a
// garbled one costs a hand-off at most, never the election.
func DecodeHandoff(text string) Handoff {
	if text == "" {
		return Handoff{}
	}
	var j handoffJSON
	if err := json.Unmarshal([]byte(text), &j); err != nil {
		return Handoff{}
	}
	h := Handoff{Phase: j.Phase, From: j.From, To: j.To, Token: j.Token, Revision: j.Revision}
	if j.WaitMs > 0 && j.WaitMs <= MaxReserveWait.Milliseconds() {
		h.Wait = time.Duration(j.WaitMs) * time.Millisecond
	} else if j.WaitMs != 0 {
		return Handoff{}
	}
	if h.check() != nil {
		return Handoff{}
	}
	return h
}
