package postgres

// ListenInDatabase makes the listening connections of a backend opened
// with opts connect to database instead, where no notification of the
// table arrives, as behind a transaction-mode pooler.
func ListenInDatabase(opts Options, database string) Options {
	opts.listenDatabase = database
	return opts
}
