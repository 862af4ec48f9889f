package kubeclient

import "sync"

// Clients are the Kubernetes clients of one process, each made by
// NewClient on first use, so a process that needs none never loads a
// kubeconfig. The election's Lease has a client of its own, with its own
// connections: a request that runs out of time closes its client's
// connections (so the retry dials anew), and a Pod patch or an Event
// slowed by an admission webhook must not abort a renewal in flight or
// reset the watch. The Pod publisher and the Events share the other one.
// Clients are safe for concurrent use.
type Clients struct {
	election, others func() (*Client, error)
}

// NewClients returns the clients of the API server src names, each made
// with o. Nothing is read or dialled here: each client is made by the
// first call of its method, which loads src; an error is returned again
// by every later call of that method.
func NewClients(src Source, o Options) *Clients {
	build := func() (*Client, error) {
		rc, err := src.RESTConfig()
		if err != nil {
			return nil, err
		}
		return NewClient(rc, o)
	}
	return &Clients{election: sync.OnceValues(build), others: sync.OnceValues(build)}
}

// Election returns the client of the election's Lease.
func (c *Clients) Election() (*Client, error) { return c.election() }

// Others returns the client of everything but the election: the Pod
// publisher and the Events.
func (c *Clients) Others() (*Client, error) { return c.others() }
