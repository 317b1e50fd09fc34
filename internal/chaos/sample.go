package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// sampleTimeout bounds one round of samples: a paused relay does not
	// answer its /metrics.
	sampleTimeout = 10 * time.Second
	// sampleMargin: no periodic sample this close to the load's end, where
	// the end-of-load one is taken.
	sampleMargin = 5 * time.Second
)

// sampleDuringLoad samples the relays when the load starts, every
// SampleEvery while it runs, and when it ends. The run samples once more
// after the drain.
func (h *harness) sampleDuringLoad(ctx, load context.Context) {
	h.sample(ctx, SampleLoad)
	last := h.started.Add(h.cfg.Duration - sampleMargin)
	for next := h.started.Add(h.cfg.SampleEvery); !next.After(last); next = next.Add(h.cfg.SampleEvery) {
		sleep(load, time.Until(next))
		if load.Err() != nil {
			break
		}
		h.sample(ctx, SampleLoad)
	}
	<-load.Done()
	if ctx.Err() == nil {
		h.sample(ctx, SampleEnd)
	}
}

// sample takes one sample of every relay process and appends it to its
// series.
func (h *harness) sample(ctx context.Context, phase string) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	at := time.Since(h.started)
	conns, err := h.connectionsByApp(ctx)
	if err != nil {
		h.logf("sample: connections: %v", err)
	}
	samples := make([]ResourceSample, len(h.relays))
	var wg sync.WaitGroup
	for i, c := range h.relays {
		wg.Go(func() {
			s := ResourceSample{At: at, Phase: phase, RSS: -1, Goroutines: -1, Conns: -1}
			if n, ok := conns[h.appName(c.name)]; ok || err == nil {
				s.Conns = n
			}
			if p := c.current(); p != nil {
				s.PID = p.cmd.Process.Pid
				s.RSS = residentBytes(s.PID)
				s.Goroutines = goroutines(ctx, c.metricsAddr)
			}
			samples[i] = s
		})
	}
	wg.Wait()
	h.mu.Lock()
	for i, c := range h.relays {
		h.resources[c.name] = append(h.resources[c.name], samples[i])
	}
	h.mu.Unlock()
}

// connectionsByApp counts the server's connections by application_name,
// for the relays' names (each process's connections carry its own).
func (h *harness) connectionsByApp(ctx context.Context) (map[string]int, error) {
	var names []string
	for _, c := range h.relays {
		names = append(names, h.appName(c.name))
	}
	rows, err := h.pool.Query(ctx, `SELECT application_name, count(*)::int FROM pg_stat_activity
WHERE application_name = ANY($1) GROUP BY 1`, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

// residentBytes is the resident memory of process pid (VmRSS of
// /proc/<pid>/status), or -1 where that cannot be read (not Linux, the
// process gone).
func residentBytes(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return -1
		}
		return kb << 10
	}
	return -1
}

// goroutines is go_goroutines from the Prometheus metrics of the admin
// endpoint at addr, or -1 when it does not answer (a paused process).
func goroutines(ctx context.Context, addr string) int {
	if addr == "" {
		return -1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int(n)
		}
	}
	return -1
}
