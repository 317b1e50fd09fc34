package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress writes one status line. On a terminal the line is rewritten in
// place; elsewhere (a file, a CI log) each update is a line of its own,
// at most one every 5 seconds besides phase starts.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	open  bool // a rewritten line is on screen without its newline
	start time.Time
	cur   string
	last  time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// phase starts a phase: its name prefixes the following lines.
func (p *progress) phase(name string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.cur = name
	p.mu.Unlock()
	p.line(fmt.Sprintf("phase %s", name), true)
}

// printf shows a status.
func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.line(fmt.Sprintf(format, args...), false)
}

func (p *progress) line(msg string, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	text := fmt.Sprintf("bench %.0fs", now.Sub(p.start).Seconds())
	if p.cur != "" {
		text += " [" + p.cur + "]"
	}
	text += " " + msg
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", text)
		p.open = true
		return
	}
	if !force && now.Sub(p.last) < 5*time.Second {
		return
	}
	p.last = now
	fmt.Fprintln(p.w, strings.TrimSpace(text))
}

// done ends the line on a terminal.
func (p *progress) done() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}
