package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

type listener struct {
	name, address string
	handler       http.Handler
}

type server struct {
	srv *http.Server
	ln  net.Listener
}

func (s server) serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen binds every listener with an address, before the sidecar joins
// the election, so a port conflict stops it early.
func listen(log *slog.Logger, ls []listener) ([]server, error) {
	var servers []server
	for _, l := range ls {
		if l.address == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.address)
		if err != nil {
			for _, s := range servers {
				_ = s.ln.Close()
			}
			return nil, fmt.Errorf("%s listener: %w", l.name, err)
		}
		log.Info("serving", "listener", l.name, "address", ln.Addr().String())
		servers = append(servers, server{
			srv: &http.Server{
				Handler:           l.handler,
				ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout:       10 * time.Second,
				IdleTimeout:       60 * time.Second,
				ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			},
			ln: ln,
		})
	}
	return servers, nil
}
