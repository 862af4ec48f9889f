package main

import (
	"strings"
	"testing"
)

// sidecar check prints --postgres-url with its password masked, in a
// URL's userinfo or password parameter and in key=value pairs, given as a
// flag or as LEADER_SIDECAR_POSTGRES_URL.
func TestCheckMasksThePostgresPassword(t *testing.T) {
	for _, c := range []struct {
		args, env []string
		want      string
	}{
		{[]string{"--postgres-url", "postgres://app:s3cret@db.internal:5432/orders?sslmode=require"}, nil,
			"postgres://app:xxxxx@db.internal:5432/orders?sslmode=require"},
		{nil, []string{"LEADER_SIDECAR_POSTGRES_URL=postgresql://app@db/orders?password=s3cret"},
			"postgresql://app@db/orders?password=xxxxx"},
		{[]string{"--postgres-url", "host=db user=app password=s3cret dbname=orders"}, nil,
			"host=db user=app password=xxxxx dbname=orders"},
		{[]string{"--postgres-url", "host=db password='s3 cret' dbname=orders"}, nil,
			"host=db password=xxxxx dbname=orders"},
	} {
		args := append([]string{"check", "--backend", "postgres"}, c.args...)
		code, stdout, stderr := runArgs(t, args, c.env...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		if strings.Contains(stdout+stderr, "s3") {
			t.Errorf("check printed the password:\n%s", stdout)
		}
		if !strings.Contains(stdout, "postgres-url: "+c.want+"\n") {
			t.Errorf("check printed:\n%s\nwant the line postgres-url: %s", stdout, c.want)
		}
	}
}

// A --postgres-url that does not parse, or a --postgres-signal that is
// none of the modes, is a usage error (exit 2) naming the flag, never the
// password.
func TestPostgresFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--postgres-url", "postgres://app:s3cret@db:notaport/orders"}, "--postgres-url: postgres: the connection string does not parse"},
		{[]string{"--postgres-url", "host=db password=s3cret port=notaport"}, "--postgres-url: postgres: the connection string does not parse"},
		{[]string{"--postgres-signal", "listen"}, `--postgres-signal: must be one of auto, notify, poll, got "listen"`},
		{[]string{"--postgres-table", ""}, "--postgres-table: must not be empty"},
	} {
		args := append([]string{"--backend", "postgres"}, c.args...)
		code, _, stderr := runArgs(t, args)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", args, code, stderr, c.want)
		}
		if strings.Contains(stderr, "s3cret") {
			t.Errorf("%q: the error holds the password: %q", args, stderr)
		}
	}
}

// Shard mode runs on PostgreSQL: sidecar check accepts --shards with
// --backend postgres and prints the group.
func TestCheckAcceptsShardsOnPostgres(t *testing.T) {
	args := []string{"check", "--backend", "postgres", "--postgres-url", "postgres://app@db/orders", "--shards", "4", "--shard-group", "billing"}
	code, stdout, stderr := runArgs(t, args)
	if code != 0 {
		t.Fatalf("%q: exit %d, stderr %q; want 0", args, code, stderr)
	}
	for _, line := range []string{"shards: 4\n", "shard-group: billing\n"} {
		if !strings.Contains(stdout, line) {
			t.Errorf("check printed:\n%s\nwant the line %q", stdout, line)
		}
	}
}
