package pgtest

// Pooler is a running PgBouncer in front of a Server, in transaction mode
// (pool_mode=transaction): each transaction, or each statement outside
// one, gets whichever server session is free, so session state such as
// LISTEN does not follow the client. It is what a transaction-mode pooler
// in production does to a client, PgBouncer's own behaviour included.
type Pooler struct {
	// DSN reaches the server through the pooler, as user postgres,
	// database postgres.
	DSN string
	// SocketDir is the directory of the pooler's Unix socket (port 6432).
	SocketDir string
	// LogPath is the pooler's log file.
	LogPath string
	stop    func() error
}

// StartPooler starts PgBouncer in transaction mode in front of s, with at
// most poolSize server sessions. Stop it before s.
func StartPooler(s *Server, poolSize int) (*Pooler, error) { return startPooler(s, poolSize) }

// Stop stops the pooler and removes its directory.
func (p *Pooler) Stop() error { return p.stop() }
