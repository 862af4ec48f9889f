package main

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestStopSignalsIncludeSIGHUP(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if !slices.Contains(stopSignals, sig) {
			t.Fatalf("%v does not stop the commands", sig)
		}
	}
}

// A signal sent to the process and to its process group at once (GNU
// timeout) is one signal; the same signal later, or another signal, is a
// second one.
func TestWithoutRepeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(chan os.Signal, 4)
		out := withoutRepeats(in, repeatWindow)
		var got []os.Signal
		send := func(sig os.Signal) {
			in <- sig
			synctest.Wait()
			for len(out) > 0 {
				got = append(got, <-out)
			}
		}
		send(syscall.SIGTERM)
		send(syscall.SIGTERM) // timeout's signal to the group
		time.Sleep(repeatWindow / 2)
		send(syscall.SIGTERM) // still the same one
		time.Sleep(repeatWindow)
		send(syscall.SIGTERM) // a second SIGTERM, sent on purpose
		send(syscall.SIGINT)  // another signal at once
		close(in)
		synctest.Wait()
		want := []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGINT}
		if !slices.Equal(got, want) {
			t.Fatalf("passed on %v, want %v", got, want)
		}
		if _, open := <-out; open {
			t.Fatal("the channel stays open after its input closed")
		}
	})
}
