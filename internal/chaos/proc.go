package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// component is one supervised child process of the outbox-lab binary: it is
// restarted after an exit the harness did not cause (and that is counted).
type component struct {
	name    string
	binary  string
	args    []string
	env     []string // added to the harness's environment
	ready   string   // output that says it is up
	logPath string
	// failpointFile arms the running process at the failpoint it names
	// (OUTBOX_FAILPOINT_FILE); "" for a component without failpoints.
	failpointFile string
	// metricsAddr is the host:port of the process's admin endpoint
	// (OUTBOX_METRICS_ADDR); "" for a component without one.
	metricsAddr string

	mu         sync.Mutex
	cur        *process
	want       bool // restart it if it exits on its own
	closing    bool
	starts     int
	unexpected []string
}

// process is one run of a component.
type process struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	mu       sync.Mutex
	watchers []watcher
	lastLine string
}

type watcher struct {
	substr string
	ch     chan string
}

// start runs the component with extra environment variables and waits up
// to within for its ready line. The component is supervised afterwards.
func (c *component) start(within time.Duration, extraEnv ...string) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return errors.New("harness is closing")
	}
	if c.cur != nil && !c.cur.done() {
		c.mu.Unlock()
		return fmt.Errorf("%s is running already", c.name)
	}
	c.starts++
	p := &process{exited: make(chan struct{})}
	ready := p.watch(c.ready)
	if err := c.launch(p, extraEnv); err != nil {
		c.mu.Unlock()
		return err
	}
	c.cur = p
	c.want = true
	c.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%s exited before %q (see %s): %s", c.name, c.ready, c.logPath, p.last())
	case <-time.After(within):
		return fmt.Errorf("%s printed no %q within %s (see %s)", c.name, c.ready, within, c.logPath)
	}
}

// launch starts the process; c.mu is held.
func (c *component) launch(p *process, extraEnv []string) error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: log of %s: %w", c.name, err)
	}
	fmt.Fprintf(logf, "==== %s start #%d at %s: %s\n", c.name, c.starts, time.Now().Format(time.RFC3339Nano), strings.Join(c.args, " "))
	cmd := exec.Command(c.binary, c.args...)
	cmd.Env = append(append(childEnv(), c.env...), extraEnv...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = procAttr()
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start %s: %w", c.name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.line(line)
		}
		_, _ = io.Copy(io.Discard, pr)
		logf.Close()
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		close(p.exited)
		c.exited(p, err)
	}()
	return nil
}

// exited restarts the component after an exit nobody asked for.
func (c *component) exited(p *process, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != p || !c.want || c.closing {
		return
	}
	c.unexpected = append(c.unexpected, fmt.Sprintf("%s exited on its own at %s (%v): %s", c.name, time.Now().Format("15:04:05.000"), err, p.last()))
	go func() {
		time.Sleep(time.Second)
		c.mu.Lock()
		if c.cur != p || c.closing {
			c.mu.Unlock()
			return
		}
		c.cur = nil
		c.mu.Unlock()
		if err := c.start(60 * time.Second); err != nil {
			c.mu.Lock()
			c.unexpected = append(c.unexpected, fmt.Sprintf("%s could not be restarted: %v", c.name, err))
			c.mu.Unlock()
		}
	}()
}

func (p *process) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastLine = s
	kept := p.watchers[:0]
	for _, w := range p.watchers {
		if strings.Contains(s, w.substr) {
			w.ch <- s
			continue
		}
		kept = append(kept, w)
	}
	p.watchers = kept
}

// watch returns a channel that receives the first later line containing substr.
func (p *process) watch(substr string) <-chan string {
	ch := make(chan string, 1)
	p.mu.Lock()
	p.watchers = append(p.watchers, watcher{substr, ch})
	p.mu.Unlock()
	return ch
}

func (p *process) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastLine
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// arm makes the running process pause at the failpoint point the next time
// it reaches it (see package failpoint).
func (c *component) arm(point string) error {
	if c.failpointFile == "" {
		return fmt.Errorf("%s has no failpoints", c.name)
	}
	if err := os.MkdirAll(filepath.Dir(c.failpointFile), 0o755); err != nil {
		return fmt.Errorf("chaos: arm %s: %w", c.name, err)
	}
	tmp := c.failpointFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(point+"\n"), 0o644); err != nil {
		return fmt.Errorf("chaos: arm %s: %w", c.name, err)
	}
	if err := os.Rename(tmp, c.failpointFile); err != nil {
		return fmt.Errorf("chaos: arm %s: %w", c.name, err)
	}
	return nil
}

// disarm undoes arm; a process already paused at the point stays paused.
func (c *component) disarm() {
	if c.failpointFile != "" {
		_ = os.Remove(c.failpointFile)
	}
}

// current returns the running process, or nil.
func (c *component) current() *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur.done() {
		return nil
	}
	return c.cur
}

// signal sends sig to the running process, if any.
func (c *component) signal(sig os.Signal) error {
	p := c.current()
	if p == nil {
		return fmt.Errorf("%s is not running", c.name)
	}
	return p.cmd.Process.Signal(sig)
}

// kill stops the component with SIGKILL and waits for the exit; it stays
// down until started again.
func (c *component) kill() {
	c.stopWith(os.Kill, 0)
}

// stop sends SIGTERM (then SIGKILL after within) and waits; it stays down
// until started again.
func (c *component) stop(within time.Duration) {
	c.stopWith(sigTerm, within)
}

func (c *component) stopWith(sig os.Signal, within time.Duration) {
	c.mu.Lock()
	c.want = false
	p := c.cur
	c.mu.Unlock()
	if p == nil || p.done() {
		return
	}
	_ = p.cmd.Process.Signal(sigCont) // a stopped process cannot handle SIGTERM
	_ = p.cmd.Process.Signal(sig)
	if sig != os.Kill {
		select {
		case <-p.exited:
			return
		case <-time.After(within):
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.exited
}

// ensure starts the component if it is not running.
func (c *component) ensure(within time.Duration) error {
	if p := c.current(); p != nil {
		_ = p.cmd.Process.Signal(sigCont)
		return nil
	}
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
	return c.start(within)
}

// close stops the component for good.
func (c *component) close(within time.Duration) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.stop(within)
}

func (c *component) unexpectedExits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.unexpected...)
}

// buildBinary builds the outbox-lab command with failpoints into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "outbox-lab")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "failpoints", "-o", bin, "github.com/outbox-dev/outbox/cmd/outbox-lab")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: build the outbox-lab binary with failpoints (run from the module's source tree, or set Binary): %w\n%s", err, out)
	}
	return bin, nil
}

// childEnv is the harness's environment without its OUTBOX_* variables:
// each child is configured by the harness alone.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOX_") {
			env = append(env, kv)
		}
	}
	return env
}
