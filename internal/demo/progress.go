package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// progress writes the progress line: rewritten in place on a terminal,
// one line per update otherwise.
type progress struct {
	out      io.Writer
	terminal bool
	every    time.Duration
	start    time.Time
	width    int
}

func newProgress(out io.Writer, every time.Duration) *progress {
	p := &progress{out: out, start: time.Now()}
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	p.every = every
	if p.every == 0 {
		p.every = 2 * time.Second
		if p.terminal {
			p.every = 250 * time.Millisecond
		}
	}
	return p
}

// show writes the events that happened since the last call, each on a line
// of its own, then the status line.
func (p *progress) show(events []string, line string) {
	stamp := fmt.Sprintf("%5.1fs  ", time.Since(p.start).Seconds())
	if p.terminal {
		fmt.Fprint(p.out, "\r\033[K") // back to the start of the status line, and clear it
	}
	for _, e := range events {
		fmt.Fprintln(p.out, stamp+e)
	}
	if !p.terminal {
		fmt.Fprintln(p.out, stamp+line)
		return
	}
	p.width = len(stamp + line)
	fmt.Fprint(p.out, stamp+line)
}

// finish ends the updating line.
func (p *progress) finish() {
	if p.terminal && p.width > 0 {
		fmt.Fprintln(p.out)
	}
}

// progressLoop shows the progress until stop is closed.
func (s *system) progressLoop(p *progress, stop <-chan struct{}) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			p.show(s.takeNotes(), s.progressLine())
			return
		case <-t.C:
			p.show(s.takeNotes(), s.progressLine())
		}
	}
}

// progressLine is the current state on one line.
func (s *system) progressLine() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	outboxes := "outbox ?"
	if c, err := countOutboxes(ctx, s.b.ordersOutbox, s.b.inventoryOutbox); err == nil {
		outboxes = fmt.Sprintf("outbox %d pending %d sent %d dead", c.unsent, c.sent, c.dead)
	}
	p50, p99, _ := s.latency.percentiles()
	return fmt.Sprintf("orders %d (+%d invalid)  %s  invoices %d  dups absorbed %d  latency p50 %s p99 %s",
		s.load.placed.Load(), s.load.rejected.Load(), outboxes, s.billing.created.Load(),
		s.billing.duplicates.Load()+s.inventory.duplicates.Load(), ms(p50), ms(p99))
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// writeSummary prints the summary and the checks.
func writeSummary(out io.Writer, s Summary) {
	chaos := "no chaos"
	if s.RelayKills+s.BrokerRestarts > 0 {
		chaos = fmt.Sprintf("chaos: %d relay kills, %d broker restarts", s.RelayKills, s.BrokerRestarts)
	}
	fmt.Fprintf(out, "\nSummary: %s of load, drained in %s, seed %d, %s\n", s.Duration, s.Drain, s.Seed, chaos)
	fmt.Fprintf(out, "  orders        %d accepted (%d paid, %d shipped, %d cancelled), %d invalid rejected with 400\n",
		s.Orders, s.Paid, s.Shipped, s.Cancelled, s.Rejected)
	if s.ServerErrors > 0 {
		fmt.Fprintf(out, "                %d requests failed with a server error (an overloaded machine: see demo.log)\n", s.ServerErrors)
	}
	fmt.Fprintf(out, "  outboxes      %d sent, %d unsent, %d dead letters (order service and inventory)\n", s.Sent, s.Unsent, s.Dead)
	fmt.Fprintf(out, "  orders topic  %d duplicate records of this run's events (sent again: a relay was killed, or the broker went away, before the mark)\n", s.TopicDuplicates)
	fmt.Fprintf(out, "  consumers     %d invoices, %d reservations; %d events applied, %d duplicate deliveries absorbed, %d parked\n",
		s.Invoices, s.Reservations, s.Processed, s.Duplicates, s.Parked)
	fmt.Fprintf(out, "  latency       order created -> invoice committed: p50 %s, p99 %s, max %s\n", ms(s.LatencyP50), ms(s.LatencyP99), ms(s.LatencyMax))
	for _, c := range s.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %s  %s\n", mark, c.Name)
		for _, p := range c.Problems {
			fmt.Fprintf(out, "          %s\n", p)
		}
	}
	if s.Kept {
		fmt.Fprintf(out, "  data kept in %s\n", s.DataDir)
	}
}
