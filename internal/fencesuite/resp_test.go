package fencesuite_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is one connection to a Redis server speaking RESP2: enough to
// send a command and read its reply, which is all the guard tests need.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// respError is an error reply ("-ERR ...").
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

func dialRedis(socket string) (*respConn, error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{conn: conn, r: bufio.NewReader(conn)}, nil
}

func (c *respConn) close() error { return c.conn.Close() }

// do sends a command and returns its reply: a string (simple or bulk),
// nil (a null bulk or array), an int64, a []any, or a respError.
func (c *respConn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return nil, err
	}
	reply, err := c.reply()
	if err != nil {
		return nil, err
	}
	if e, ok := reply.(respError); ok {
		return nil, e
	}
	return reply, nil
}

func (c *respConn) reply() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("redis: malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err // -1: a null bulk string
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = c.reply(); err != nil {
				return nil, err
			}
		}
		return items, nil
	}
	return nil, errors.New("redis: unknown reply type " + strconv.Quote(line))
}
