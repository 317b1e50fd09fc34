package orderservice_test

import (
	"testing"
)

// The server HTTPServer returns bounds every connection, and serves the
// service's API.
func TestHTTPServer_BoundsEveryConnection(t *testing.T) {
	t.Parallel()
	b, _ := setupSQLite(t)
	srv := b.svc.HTTPServer()
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %s, read %s, write %s, idle %s; want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	if srv.Handler == nil || srv.ErrorLog == nil {
		t.Fatal("HTTPServer has no handler or no error log")
	}
}
