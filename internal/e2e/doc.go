// Package e2e holds end-to-end tests that run the real `outbox-lab` binary
// (every outbox command and the example services, built with -tags
// failpoints) against real PostgreSQL and the embedded Kafka-protocol
// broker, and really kill it: SIGKILL at each crash point, SIGTERM for the
// graceful stop. It has no non-test code.
package e2e
