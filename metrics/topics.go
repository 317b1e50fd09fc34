package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox/sink"
)

// ErrNoTopics is returned by NewTopics when fn is nil.
var ErrNoTopics = errors.New("metrics: the topics function is required")

// NewTopics registers metrics of the topics a relay's sink publishes to,
// read through fn (a [sink.TopicReporter]'s Topics) on each scrape:
//
//	relay_topic_published_total{topic}  counter  records of the topic the broker acknowledged since the relay started
//	relay_topic_unavailable{topic,reason} gauge  1 while the topic cannot take records (missing, not authorized); its messages wait
func NewTopics(reg prometheus.Registerer, fn func() []sink.TopicStatus) error {
	if fn == nil {
		return ErrNoTopics
	}
	return reg.Register(&topicCollector{
		fn: fn,
		published: prometheus.NewDesc("outbox_relay_topic_published_total",
			"Records of the topic the broker acknowledged since the relay started.", []string{"topic"}, nil),
		unavailable: prometheus.NewDesc("outbox_relay_topic_unavailable",
			"1 while the topic cannot take records (it does not exist, or the relay may not write to it); its messages wait without counting attempts.",
			[]string{"topic", "reason"}, nil),
	})
}

type topicCollector struct {
	fn                     func() []sink.TopicStatus
	published, unavailable *prometheus.Desc
}

func (c *topicCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.published
	ch <- c.unavailable
}

func (c *topicCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.fn() {
		ch <- prometheus.MustNewConstMetric(c.published, prometheus.CounterValue, float64(t.Published), t.Topic)
		ch <- prometheus.MustNewConstMetric(c.unavailable, prometheus.GaugeValue, boolGauge(t.Unavailable()), t.Topic, t.Reason)
	}
}
