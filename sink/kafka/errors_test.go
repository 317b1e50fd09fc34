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

// TestClassifyError says the class of each produce error and why. The
// rule: only a record that is itself at fault is permanent; a topic that
// cannot take records now keeps its records waiting (topic unavailable); a
// broker that cannot be reached, or refuses the client as a whole, pauses
// the relay (unavailable); what nobody expected counts an attempt.
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
		why    string
	}{
		{"message too large", tooLarge, sink.Permanent, "MESSAGE_TOO_LARGE", "the record is over the topic's or the producer's limit"},
		{"record list too large", kerr.RecordListTooLarge, sink.Permanent, "RECORD_LIST_TOO_LARGE", "the record is over the limit (franz-go retried it alone)"},
		{"invalid record", kerr.InvalidRecord, sink.Permanent, "INVALID_RECORD", "the broker validated the record and refused it (a compacted topic without a key)"},
		{"corrupt message", kerr.CorruptMessage, sink.Permanent, "CORRUPT_MESSAGE", "older brokers' INVALID_RECORD; franz-go already retried a CRC failure"},
		{"invalid timestamp", kerr.InvalidTimestamp, sink.Permanent, "INVALID_TIMESTAMP", "the record's timestamp is outside the topic's range"},
		{"invalid topic", kerr.InvalidTopicException, sink.Permanent, "INVALID_TOPIC_EXCEPTION", "the message names a topic Kafka cannot have (routes are validated at start)"},
		{"policy violation", kerr.PolicyViolation, sink.Permanent, "POLICY_VIOLATION", "a broker policy refused this record"},
		{"wrapped twice", fmt.Errorf("kafka: publish: %w", tooLarge), sink.Permanent, "MESSAGE_TOO_LARGE", "wrapping does not hide the code"},

		{"unknown topic", kerr.UnknownTopicOrPartition, sink.TopicUnavailable, "UNKNOWN_TOPIC_OR_PARTITION", "the topic does not exist yet: configuration, not the record"},
		{"unknown topic id", kerr.UnknownTopicID, sink.TopicUnavailable, "UNKNOWN_TOPIC_ID", "the topic was deleted or re-created"},
		{"missing partition", errors.New("metadata update is missing a partition that we were previously using"), sink.TopicUnavailable, "missing a partition", "franz-go's error for a topic deleted under it"},
		{"topic authorization", kerr.TopicAuthorizationFailed, sink.TopicUnavailable, "TOPIC_AUTHORIZATION_FAILED", "an ACL is missing for this topic: the other topics flow"},
		{"not enough replicas", kerr.NotEnoughReplicas, sink.TopicUnavailable, "NOT_ENOUGH_REPLICAS", "the partition lacks in-sync replicas: the cluster's state"},
		{"not enough replicas after append", kerr.NotEnoughReplicasAfterAppend, sink.TopicUnavailable, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "the same, found after the write"},
		{"leader not available", kerr.LeaderNotAvailable, sink.TopicUnavailable, "LEADER_NOT_AVAILABLE", "the partition has no leader (a topic being created, a broker down)"},
		{"not leader", kerr.NotLeaderForPartition, sink.TopicUnavailable, "NOT_LEADER_FOR_PARTITION", "leadership is moving"},
		{"storage error", kerr.KafkaStorageError, sink.TopicUnavailable, "KAFKA_STORAGE_ERROR", "the partition's log directory failed on the broker"},
		{"unsupported for message format", kerr.UnsupportedForMessageFormat, sink.TopicUnavailable, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "the topic's message format cannot hold headers: every record of the topic fails alike"},

		{"cluster authorization", kerr.ClusterAuthorizationFailed, sink.Unavailable, "CLUSTER_AUTHORIZATION_FAILED", "no IDEMPOTENT_WRITE on the cluster: every record fails alike"},
		{"sasl authentication", kerr.SaslAuthenticationFailed, sink.Unavailable, "SASL_AUTHENTICATION_FAILED", "bad credentials: every record fails alike"},
		{"transactional id authorization", kerr.TransactionalIDAuthorizationFailed, sink.Unavailable, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "the client's ACLs, not the record"},
		{"invalid required acks", kerr.InvalidRequiredAcks, sink.Unavailable, "INVALID_REQUIRED_ACKS", "the client's settings, not the record"},
		{"unsupported version", kerr.UnsupportedVersion, sink.Unavailable, "UNSUPPORTED_VERSION", "the broker is too old for the client"},
		{"request timed out", kerr.RequestTimedOut, sink.Unavailable, "REQUEST_TIMED_OUT", "the broker did not answer in time"},
		{"network exception", kerr.NetworkException, sink.Unavailable, "NETWORK_EXCEPTION", "any other code Kafka flags retriable is a transient cluster state"},

		{"unknown server error", kerr.UnknownServerError, sink.Retriable, "UNKNOWN_SERVER_ERROR", "may concern the record: counts, so a poison ends as a dead letter"},
		{"out of order sequence", kerr.OutOfOrderSequenceNumber, sink.Retriable, "OUT_OF_ORDER_SEQUENCE_NUMBER", "franz-go recovers with a new producer id"},
		{"other non-retriable", kerr.InvalidTxnState, sink.Retriable, "INVALID_TXN_STATE", "a code not expected on produce counts an attempt instead of dead-lettering at once"},
		{"unrecognised", errors.New("something odd"), sink.Retriable, "something odd", "unknown: counts an attempt"},

		{"deadline", fmt.Errorf("no acknowledgement: %w", deadline.Err()), sink.Unavailable, "deadline exceeded", "no answer in time"},
		{"canceled", fmt.Errorf("no acknowledgement: %w", context.Canceled), sink.Unavailable, "canceled", "the relay stopped waiting"},
		{"record timeout", fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.NotEnoughReplicas), sink.Unavailable, "timed out", "the producer gave up waiting"},
		{"record retries", kgo.ErrRecordRetries, sink.Unavailable, "retried", "the producer gave up retrying"},
		{"client closed", kgo.ErrClientClosed, sink.Unavailable, "client closed", "shutting down"},
		{"eof", fmt.Errorf("read: %w", io.EOF), sink.Unavailable, "EOF", "the connection dropped"},
		{"connection refused", fmt.Errorf("unable to dial: %w", refusedDial(t)), sink.Unavailable, "connection refused", "no broker listens"},
		{"net error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, sink.Unavailable, "i/o timeout", "the network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kafka.ClassifyError(tc.err)
			if c := sink.Classify(got); c != tc.want {
				t.Errorf("ClassifyError(%v) = %v, class %v, want %v: %s", tc.err, got, c, tc.want, tc.why)
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

// Every Kafka error code gets a class, and only the codes that say the
// record itself is bad are permanent: a code Kafka flags retriable never
// dead-letters a message.
func TestClassifyError_EveryKafkaCode(t *testing.T) {
	t.Parallel()
	recordFaults := map[string]bool{"MESSAGE_TOO_LARGE": true, "RECORD_LIST_TOO_LARGE": true, "INVALID_RECORD": true,
		"CORRUPT_MESSAGE": true, "INVALID_TIMESTAMP": true, "INVALID_TOPIC_EXCEPTION": true, "POLICY_VIOLATION": true}
	seen := 0
	for code := int16(-1); code < 200; code++ {
		ke, ok := kerr.ErrorForCode(code).(*kerr.Error)
		if !ok || ke.Message == "UNKNOWN_ERROR" && code != -1 {
			continue
		}
		seen++
		class := sink.Classify(kafka.ClassifyError(ke))
		if (class == sink.Permanent) != recordFaults[ke.Message] {
			t.Errorf("%s (code %d, retriable %v) is %v; only the record's own faults are permanent", ke.Message, code, ke.Retriable, class)
		}
		if ke.Retriable && class == sink.Retriable {
			t.Errorf("%s is flagged retriable by Kafka but counts an attempt", ke.Message)
		}
	}
	if seen < 100 {
		t.Fatalf("swept %d Kafka error codes, want the whole list", seen)
	}
}
