// Package freeport chooses TCP ports on 127.0.0.1 for a process that is
// to listen on them later, or again after a restart: the chaos harness's
// processes and proxies, and tests that stop and restart a broker or a
// proxy on the same address.
//
// A port from "127.0.0.1:0" is free only until it is closed: the next
// listener on port 0 or the next outgoing connection, of this process or
// of any other, may be given the same one before the process that is to
// listen on it starts, and that process then fails with "address already
// in use". The kernel never hands out a port below its ephemeral range by
// itself, so Port chooses there: only another chooser of the same kind
// could take one of these, and within a process Port never hands out the
// same port twice.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are chosen in [lowestPort, the start of the ephemeral range).
const (
	lowestPort     = 20000
	ephemeralStart = 32768 // Linux's default when /proc does not tell
)

var (
	portsMu sync.Mutex
	given   = map[int]bool{} // ports handed out by this process
)

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ephemeralStart
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return ephemeralStart
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return ephemeralStart
	}
	return low
}

// Port returns a port that is free on 127.0.0.1 now, lies below the
// kernel's ephemeral range where it can, and was not returned before by
// this process.
func Port() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	if low := ephemeralLow(); low-lowestPort >= 1000 {
		for range 100 {
			port := lowestPort + rand.IntN(low-lowestPort)
			if given[port] {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue
			}
			ln.Close()
			given[port] = true
			return port, nil
		}
	}
	// The ephemeral range starts too low, or the ports tried below it
	// were taken: fall back to one the kernel picks.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	given[port] = true
	return port, nil
}

// Addr is Port as "127.0.0.1:port".
func Addr() (string, error) {
	port, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
