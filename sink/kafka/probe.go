package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox/sink"
)

// probeEvery is how often the sink asks the cluster whether the topics it
// knows to be missing exist now.
const probeEvery = time.Second

var _ sink.TopicReporter = (*Sink)(nil)

// Topics returns the state of each topic the sink published to, or tried
// to, since it was created, sorted by name (see [sink.TopicReporter]).
func (s *Sink) Topics() []sink.TopicStatus { return s.topics.statuses(time.Now()) }

// probeMissing asks the cluster every probeEvery whether the missing
// topics exist now, until Close. A record for a missing topic fails at once
// (Publish), so the probe is what lets its messages go out once the topic
// is created.
func (s *Sink) probeMissing() {
	defer close(s.probeExited)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.probeDone:
			return
		case <-t.C:
		}
		missing := s.topics.missingTopics()
		if len(missing) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeEvery)
		exist, err := s.existing(ctx, missing)
		cancel()
		if err != nil {
			s.cfg.Logger.Debug("kafka: probing missing topics", slog.Any("error", err))
			continue
		}
		s.topics.found(exist, time.Now())
	}
}

// existing returns those of topics that exist and have partitions. A
// metadata request with auto creation allowed (Config.AllowAutoTopicCreation)
// asks the broker to create the others.
func (s *Sink) existing(ctx context.Context, topics []string) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = s.cfg.AllowAutoTopicCreation
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.client)
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata: %w", err)
	}
	var out []string
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 && len(t.Partitions) > 0 {
			out = append(out, *t.Topic)
		}
	}
	return out, nil
}

// CheckTopics asks the cluster whether the topics the configuration names
// exist: Config.DefaultTopic and the topics of Config.TopicByAggregateType.
// It logs a warning for each missing one, saying where it is configured,
// and returns them sorted. Messages with a topic of their own, or routed
// by Config.Route, are not checked: a missing one shows when a record
// for it is refused. An error means the cluster did not answer.
func (s *Sink) CheckTopics(ctx context.Context) ([]string, error) {
	where := map[string][]string{s.cfg.DefaultTopic: {"default topic"}}
	for typ, t := range s.cfg.TopicByAggregateType {
		where[t] = append(where[t], "route "+typ+"="+t)
	}
	names := make([]string, 0, len(where))
	for t := range where {
		names = append(names, t)
	}
	sort.Strings(names)
	exist, err := s.existing(ctx, names)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, t := range names {
		if slices.Contains(exist, t) {
			continue
		}
		missing = append(missing, t)
		slices.Sort(where[t])
		s.cfg.Logger.Warn("configured topic does not exist; messages for it will wait until it does",
			slog.String("topic", t), slog.Any("configured_as", where[t]), slog.String("reason", kerr.UnknownTopicOrPartition.Message),
			slog.String("fix", fixMissingTopic))
	}
	return missing, nil
}
