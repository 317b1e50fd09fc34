package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

// Sink publishes outbox records to Kafka. It is safe for concurrent use.
type Sink struct {
	cfg       Config
	client    *kgo.Client
	closeOnce sync.Once

	// inProducer holds the records handed to the producer whose outcome
	// is not known yet, by topic and event id (see Publish).
	mu         sync.Mutex
	inProducer map[copyKey]*pending

	// alone admits one record at a time to retryTooLarge's produce, so
	// that two records retried alone (a poison and a record that shared
	// its batch) never share a batch again.
	alone chan struct{}

	// topics is what the sink knows of each topic; probing ends when
	// probeDone is closed (Close), and probeExited is closed after.
	topics      *topicBook
	probeDone   chan struct{}
	probeExited chan struct{}

	// runs are the producer clients of PublishRuns.
	runs *runClients
	// The producer's limits in effect (Config and ExtraOpts): its batch
	// limit by topic, and how much it buffers (maxBufferedBytes 0: no
	// bound).
	batchMax           func(topic string) int32
	maxBufferedRecords int64
	maxBufferedBytes   int64
}

// copyKey identifies a record in the producer: its topic and event id.
type copyKey struct {
	topic string
	id    uuid.UUID
}

// pending is the outcome of a record in the producer: err is set before
// done is closed.
type pending struct {
	done chan struct{}
	err  error
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Sink for cfg. It does not connect: the first Publish or
// Ping does. An error names the Config field at fault.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	secOpts, err := cfg.Security.Opts()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.WithLogger(slogLogger{cfg.Logger}),
		// Every in-sync replica must have the record before it counts as
		// published. The idempotent producer (franz-go's default, kept on)
		// makes the producer's own retries write each record once and in
		// order.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Keyed records are hashed with murmur2 exactly like the Java
		// client's default partitioner, so every Kafka client agrees on the
		// partition of an aggregate.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// Snappy, which every Kafka client decodes; a batch goes out
		// uncompressed when compressing does not make it smaller.
		kgo.ProducerBatchCompression(kgo.SnappyCompression(), kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.UnknownTopicRetries(UnknownTopicRetries),
		// Refresh metadata at most this often (franz-go's default is 5s),
		// so that a missing topic fails in seconds, not half a minute.
		kgo.MetadataMinAge(metadataMinAge),
	}
	if cfg.AllowAutoTopicCreation {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	opts = append(opts, secOpts...)
	opts = append(opts, cfg.ExtraOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %w", err)
	}
	s := &Sink{cfg: cfg, client: client, inProducer: make(map[copyKey]*pending), alone: make(chan struct{}, 1),
		topics: newTopicBook(cfg.Logger), probeDone: make(chan struct{}), probeExited: make(chan struct{}),
		batchMax:           client.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32),
		maxBufferedRecords: client.OptValue(kgo.MaxBufferedRecords).(int64),
		maxBufferedBytes:   client.OptValue(kgo.MaxBufferedBytes).(int64),
	}
	runOpts := append(slices.Clone(opts),
		// A run client sends only while PublishRuns flushes it (see there).
		kgo.ManualFlushing(),
		// Every record the sink builds names its topic; a record without
		// one is PublishRuns' barrier, which must fail before buffering.
		kgo.DefaultProduceTopic(""),
		kgo.WithHooks(placedHook{}),
	)
	s.runs = newRunClients(cfg.MaxRunClients, func() (*kgo.Client, error) { return kgo.NewClient(runOpts...) })
	go s.probeMissing()
	return s, nil
}

// Topic returns the topic rec is published to: the message's own Topic if
// set, else what Config.Route returns if not empty, else the topic
// Config.TopicByAggregateType maps its aggregate type to, else
// Config.DefaultTopic.
func (s *Sink) Topic(rec outbox.Record) string {
	if rec.Topic != "" {
		return rec.Topic
	}
	if s.cfg.Route != nil {
		if t := s.cfg.Route(rec); t != "" {
			return t
		}
	}
	if t, ok := s.cfg.TopicByAggregateType[rec.AggregateType]; ok && t != "" {
		return t
	}
	return s.cfg.DefaultTopic
}

// Publish produces recs and waits until the broker acknowledged or refused
// each one, or ctx is done. It returns one error per record, in the order
// of recs; nil means every in-sync replica has the record. Each error has
// been passed through [ClassifyError].
//
// Records of one aggregate share a key, hence a partition, and the
// idempotent producer writes them in the order given. All records are
// handed to the producer at once, so when a record fails, a later record of
// the same aggregate in the same call may still be published: several
// records of one aggregate go to [Sink.PublishRuns], which keeps them
// without a gap.
//
// When ctx is done first, the records not yet acknowledged get an error
// wrapping ctx.Err() (an [sink.ErrUnavailable] error), but they stay in the
// producer, which writes them if the broker comes back (with the
// idempotent producer, a record whose request may have reached the broker
// can never be taken back). A later Publish of a record with the same
// topic and event id while that copy is still in the producer does not
// produce another copy: it waits for the outcome of the one there. So a
// relay that retries a message during a broker outage, claim after claim,
// puts one copy on the topic, not one per attempt. Copies from other
// processes (another relay that took the message over after its lease
// expired) are not seen: delivery is at least once, and consumers
// deduplicate by the eventId header.
//
// When a broker refuses a batch as too large (MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE), which happens when a topic's max.message.bytes is
// below Config.MaxMessageBytes, Publish sends each refused record again on
// its own, since the batch may have held other records of this call or of
// another, so that only a record that is too large by itself fails. Setting
// Config.MaxMessageBytes to the topics' limit makes the producer refuse such
// a record before it shares a batch with others.
func (s *Sink) Publish(ctx context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	if len(recs) == 0 {
		return errs
	}
	now := time.Now()
	topics := make([]string, len(recs))
	for i, rec := range recs {
		topics[i] = s.Topic(rec)
	}
	krecs, idx := s.records(recs, topics, errs, now)
	produced := make([]error, len(krecs))
	s.produce(ctx, krecs, produced)
	for j, i := range idx {
		errs[i] = produced[j]
	}
	s.retryTooLarge(ctx, recs, topics, errs)
	s.settleTopics(recs, topics, idx, errs)
	return errs
}

// records builds the Kafka records of recs and returns them with the index
// in recs of each. A message that [Record] refuses gets a permanent error in
// errs, so that the relay dead-letters it, and no record; a message for a
// topic known to be missing gets the topic's error at once, and no record.
func (s *Sink) records(recs []outbox.Record, topics []string, errs []error, now time.Time) (krecs []*kgo.Record, idx []int) {
	krecs = make([]*kgo.Record, 0, len(recs))
	idx = make([]int, 0, len(recs))
	for i, rec := range recs {
		if te := s.topics.blocked(topics[i], now); te != nil {
			errs[i] = te
			continue
		}
		kr, err := Record(rec, topics[i], s.cfg.Limits)
		if err != nil {
			errs[i] = fmt.Errorf("%w: kafka: message %s not published to topic %s: %w", sink.ErrPermanent, rec.ID, topics[i], err)
			continue
		}
		krecs = append(krecs, kr)
		idx = append(idx, i)
	}
	return krecs, idx
}

// settleTopics counts the acknowledged records by topic and classifies the
// errors of the records produced (recs[idx]): a topic error gets its topic,
// and the topic book learns of it.
func (s *Sink) settleTopics(recs []outbox.Record, topics []string, idx []int, errs []error) {
	now := time.Now()
	acked := make(map[string]int)
	for _, i := range idx {
		err := errs[i]
		if err == nil {
			acked[topics[i]]++
			continue
		}
		err = ClassifyError(err)
		if te, ok := errors.AsType[*sink.TopicError](err); ok {
			errs[i] = s.topics.failed(topics[i], te, now)
			continue
		}
		errs[i] = fmt.Errorf("kafka: publish message %s to topic %s: %w", recs[i].ID, topics[i], err)
	}
	for t, n := range acked {
		s.topics.published(t, n, now)
	}
}

// produce hands krecs to the producer and waits for every outcome, writing
// the error of krecs[i] to errs[i], or until ctx is done.
func (s *Sink) produce(ctx context.Context, krecs []*kgo.Record, errs []error) {
	type result struct {
		i   int
		err error
	}
	// Buffered for every record, so that promises called after we returned
	// (ctx done) never block the producer.
	results := make(chan result, len(krecs))
	for i, kr := range krecs {
		key, keyed := keyOf(kr)
		p, attached := s.track(key, keyed)
		if attached {
			go func() {
				<-p.done
				results <- result{i, p.err}
			}()
			continue
		}
		// The producer's ctx only bounds its wait for buffer space; a
		// record that got in stays there until its outcome.
		s.client.Produce(ctx, kr, func(r *kgo.Record, err error) {
			s.settle(key, keyed, p, err)
			if err == nil {
				s.acknowledged(r, key.id)
			}
			results <- result{i, err}
		})
	}
	acked := make([]bool, len(krecs))
	collect := func(r result) {
		errs[r.i] = r.err
		acked[r.i] = true
	}
	for range krecs {
		select {
		case r := <-results:
			collect(r)
		case <-ctx.Done():
			// Take the outcomes that have arrived, so that no acknowledged
			// record is reported as failed.
		drain:
			for {
				select {
				case r := <-results:
					collect(r)
				default:
					break drain
				}
			}
			for i := range krecs {
				if !acked[i] {
					errs[i] = fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
				}
			}
			return
		}
	}
}

// track returns the pending outcome of the record with key (keyed false:
// it has none): that of a copy still in the producer (attached), or a new
// one that the caller must produce and settle.
func (s *Sink) track(key copyKey, keyed bool) (p *pending, attached bool) {
	p = &pending{done: make(chan struct{})}
	if !keyed {
		return p, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, found := s.inProducer[key]; found {
		return prev, true
	}
	s.inProducer[key] = p
	return p, false
}

// settle records the producer's outcome of the record that track gave p.
func (s *Sink) settle(key copyKey, keyed bool, p *pending, err error) {
	if keyed {
		s.mu.Lock()
		if s.inProducer[key] == p {
			delete(s.inProducer, key)
		}
		s.mu.Unlock()
	}
	p.err = err
	close(p.done)
}

// keyOf returns kr's topic and event id; ok is false when the eventId
// header is missing or not a UUID (Record always sets it).
func keyOf(kr *kgo.Record) (copyKey, bool) {
	for _, h := range kr.Headers {
		if h.Key == HeaderEventID {
			id, err := uuid.ParseBytes(h.Value)
			return copyKey{kr.Topic, id}, err == nil
		}
	}
	return copyKey{}, false
}

// tooLargeTries is how often retryTooLarge tries a record alone.
const tooLargeTries = 4

// isTooLarge reports whether the broker refused err's batch as too large.
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// errEarlierFailed is the error of a record not retried because an earlier
// record of its aggregate failed in the same call.
var errEarlierFailed = fmt.Errorf("%w (refused as too large with its batch, and not retried alone)", sink.ErrNotSent)

// retryTooLarge produces again, one at a time and in order, the records that
// failed as too large: the broker refuses a whole batch and the producer
// then fails every record buffered for the partition, and that batch may
// have held records of this call or of another (another relay worker's),
// so a record may fit on its own (the producer also fails the records
// buffered behind a refused batch). Each is tried alone up to tooLargeTries
// times, after a random pause of up to (linger + 10ms) * 2^try. The retries
// of all calls take turns (Sink.alone), so a record retried alone never
// shares a batch with another call's retry of the poison; the pause makes
// it unlikely to meet a new poison of a first try. Only a record refused
// every time is reported as too large.
func (s *Sink) retryTooLarge(ctx context.Context, recs []outbox.Record, topics []string, errs []error) {
	var idx []int
	for i, err := range errs {
		if isTooLarge(err) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	type aggregate struct{ typ, id string }
	failed := make(map[aggregate]bool)
	for _, i := range idx {
		agg := aggregate{recs[i].AggregateType, recs[i].AggregateID}
		switch {
		case ctx.Err() != nil:
			errs[i] = fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
		case failed[agg]:
			errs[i] = errEarlierFailed
		default:
			for try := 0; try < tooLargeTries && isTooLarge(errs[i]) && ctx.Err() == nil; try++ {
				select {
				case <-ctx.Done():
				case <-time.After(rand.N((s.cfg.Linger + 10*time.Millisecond) << try)):
				}
				kr, err := Record(recs[i], topics[i], s.cfg.Limits)
				if err != nil { // Publish built it before, so it cannot fail now
					errs[i] = err
					break
				}
				s.produceAlone(ctx, kr, errs[i:i+1])
			}
			if errs[i] != nil {
				failed[agg] = true
			}
		}
	}
}

// produceAlone produces kr while no other record is retried alone, and
// writes its outcome to errs[0].
func (s *Sink) produceAlone(ctx context.Context, kr *kgo.Record, errs []error) {
	select {
	case s.alone <- struct{}{}:
	case <-ctx.Done():
		errs[0] = fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
		return
	}
	defer func() { <-s.alone }()
	s.produce(ctx, []*kgo.Record{kr}, errs)
}

// acknowledged logs r, which the broker acknowledged, at debug level: its
// topic, partition, offset, key and message id.
func (s *Sink) acknowledged(r *kgo.Record, id uuid.UUID) {
	if !s.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	s.cfg.Logger.Debug("kafka: record acknowledged", slog.String("topic", r.Topic),
		slog.Int("partition", int(r.Partition)), slog.Int64("offset", r.Offset),
		slog.String("key", string(r.Key)), slog.String("message_id", id.String()))
}

// Ping checks that a broker is reachable and answers. Its error is passed
// through [ClassifyError], so an unreachable cluster gives an
// [sink.ErrUnavailable] error.
func (s *Sink) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx); err != nil {
		return ClassifyError(fmt.Errorf("kafka: ping: %w", err))
	}
	return nil
}

// Close closes the clients' connections, those of PublishRuns included, and
// waits for the flushes PublishRuns left running to end. Records still
// buffered from a Publish or PublishRuns whose ctx ended fail. Close is safe
// to call more than once.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		close(s.probeDone)
		<-s.probeExited
		s.client.Close()
		s.runs.close()
	})
	return nil
}
