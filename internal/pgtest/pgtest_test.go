package pgtest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A test that opens more pools than MaxPoolsPerTest fails, naming the
// limit; up to the limit it does not.
func TestPool_MoreThanMaxPoolsPerTestFails(t *testing.T) {
	f := &fatalTB{TB: t}
	done := make(chan int)
	go func() {
		opened := 0
		defer func() { done <- opened }()
		for range MaxPoolsPerTest + 1 {
			Pool(f, "public")
			opened++
		}
	}()
	opened := <-done
	if opened != MaxPoolsPerTest {
		t.Errorf("opened %d pools before failing, want %d", opened, MaxPoolsPerTest)
	}
	if !strings.Contains(f.fatal, "MaxPoolsPerTest") {
		t.Errorf("Fatalf = %q, want it to name MaxPoolsPerTest", f.fatal)
	}
}
