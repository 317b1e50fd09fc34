//go:build !race

package sqlitestore_test

// raceEnabled is true when the tests run under the race detector, which
// slows the transpiled SQLite down some twenty-fold.
const raceEnabled = false
