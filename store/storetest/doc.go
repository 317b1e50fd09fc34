// Package storetest is the conformance suite every outbox store runs: each
// behaviour of the [store.Queue] contract that the relay relies on, tested
// once, against any backend. A store is done when [Run] passes on it.
//
// A store's own test file calls Run with a function that builds a
// [Harness] on a fresh, migrated, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			st := newMigratedStore(t) // a schema or a file of its own
//			return storetest.Harness{
//				Queue:           st,
//				Enqueue:         func(ctx context.Context, msgs ...outbox.Message) error { ... commit ... },
//				EnqueueRollback: func(ctx context.Context, msgs ...outbox.Message) error { ... roll back ... },
//				Get:             st.Get,
//				ErrNotFound:     mystore.ErrNotFound,
//				Concurrent:      true,
//			}
//		})
//	}
//
// Every subtest gets a harness of its own and runs in parallel with the
// others. Lease expiry is tested with real time: short leases (a tenth of a
// second) that the suite waits out, so a store is tested with the clock it
// really uses. Times are compared with the test process's clock, with a
// slack of two seconds: run the suite against a database on the same host.
//
// What the suite does not cover, because it belongs to one backend, stays
// in that backend's tests: query plans, wake-ups (LISTEN/NOTIFY),
// migrations, connection failures.
package storetest
