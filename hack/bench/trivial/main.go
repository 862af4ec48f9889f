// Command trivial serves the smallest useful net/http handler on the
// address given as its argument: the ceiling the benchmark compares
// GET /leader with.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	body := []byte(`{"leader":true}` + "\n")
	fmt.Println(ln.Addr().String())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}
