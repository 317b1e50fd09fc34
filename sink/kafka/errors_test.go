package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// refusedDial returns the error of dialing a port nobody listens on.
func refusedDial(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("dial %s succeeded after its listener closed", addr)
	}
	return err
}

func TestClassifyError(t *testing.T) {
	t.Parallel()
	// Wrapped the way franz-go wraps them.
	tooLarge := fmt.Errorf("%w (uncompressed_bytes=%d, compressed_bytes=%d)", kerr.MessageTooLarge, 3183, 3183)
	deadline, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-deadline.Done()

	for _, tc := range []struct {
		name   string
		err    error
		want   sink.Class
		reason string // the error text must keep this
	}{
		{"message too large", tooLarge, sink.Permanent, "MESSAGE_TOO_LARGE"},
		{"record list too large", kerr.RecordListTooLarge, sink.Permanent, "RECORD_LIST_TOO_LARGE"},
		{"invalid topic", kerr.InvalidTopicException, sink.Permanent, "INVALID_TOPIC_EXCEPTION"},
		{"unknown topic after retries", kerr.UnknownTopicOrPartition, sink.Permanent, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"topic authorization", kerr.TopicAuthorizationFailed, sink.Permanent, "TOPIC_AUTHORIZATION_FAILED"},
		{"transactional id authorization", kerr.TransactionalIDAuthorizationFailed, sink.Permanent, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"},
		{"invalid record", kerr.InvalidRecord, sink.Permanent, "INVALID_RECORD"},
		{"corrupt message", kerr.CorruptMessage, sink.Permanent, "CORRUPT_MESSAGE"},
		{"unsupported for message format", kerr.UnsupportedForMessageFormat, sink.Permanent, "UNSUPPORTED_FOR_MESSAGE_FORMAT"},
		{"invalid required acks", kerr.InvalidRequiredAcks, sink.Permanent, "INVALID_REQUIRED_ACKS"},
		{"policy violation", kerr.PolicyViolation, sink.Permanent, "POLICY_VIOLATION"},
		{"other non-retriable", kerr.InvalidTimestamp, sink.Permanent, "INVALID_TIMESTAMP"},
		{"wrapped twice", fmt.Errorf("kafka: publish: %w", tooLarge), sink.Permanent, "MESSAGE_TOO_LARGE"},

		{"not enough replicas", kerr.NotEnoughReplicas, sink.Retriable, "NOT_ENOUGH_REPLICAS"},
		{"leader not available", kerr.LeaderNotAvailable, sink.Retriable, "LEADER_NOT_AVAILABLE"},
		{"request timed out", kerr.RequestTimedOut, sink.Retriable, "REQUEST_TIMED_OUT"},
		{"not leader", kerr.NotLeaderForPartition, sink.Retriable, "NOT_LEADER_FOR_PARTITION"},
		{"unknown server error", kerr.UnknownServerError, sink.Retriable, "UNKNOWN_SERVER_ERROR"},
		{"out of order sequence", kerr.OutOfOrderSequenceNumber, sink.Retriable, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
		{"unrecognised", errors.New("something odd"), sink.Retriable, "something odd"},

		{"cluster authorization", kerr.ClusterAuthorizationFailed, sink.Unavailable, "CLUSTER_AUTHORIZATION_FAILED"},
		{"sasl authentication", kerr.SaslAuthenticationFailed, sink.Unavailable, "SASL_AUTHENTICATION_FAILED"},
		{"deadline", fmt.Errorf("no acknowledgement: %w", deadline.Err()), sink.Unavailable, "deadline exceeded"},
		{"canceled", fmt.Errorf("no acknowledgement: %w", context.Canceled), sink.Unavailable, "canceled"},
		{"record timeout", fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.NotEnoughReplicas), sink.Unavailable, "timed out"},
		{"record retries", kgo.ErrRecordRetries, sink.Unavailable, "retried"},
		{"client closed", kgo.ErrClientClosed, sink.Unavailable, "client closed"},
		{"eof", fmt.Errorf("read: %w", io.EOF), sink.Unavailable, "EOF"},
		{"connection refused", fmt.Errorf("unable to dial: %w", refusedDial(t)), sink.Unavailable, "connection refused"},
		{"net error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, sink.Unavailable, "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kafka.ClassifyError(tc.err)
			if c := sink.Classify(got); c != tc.want {
				t.Errorf("ClassifyError(%v) = %v, class %d, want class %d", tc.err, got, c, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("ClassifyError(%v) = %v, lost the original error", tc.err, got)
			}
			if !strings.Contains(got.Error(), tc.reason) {
				t.Errorf("ClassifyError(%v) = %q, want the text to keep %q", tc.err, got, tc.reason)
			}
			if again := kafka.ClassifyError(got); again != got {
				t.Errorf("ClassifyError is not idempotent: %v became %v", got, again)
			}
		})
	}
	if kafka.ClassifyError(nil) != nil {
		t.Error("ClassifyError(nil) != nil")
	}
}
