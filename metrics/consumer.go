package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// Consumer holds a consumer runner's metrics, labelled by consumer name:
//
//	consumer_handled_total{consumer,result}  counter   messages handled: processed, or duplicate (absorbed by the inbox)
//	consumer_retries_total{consumer}         counter   failed attempts that will be retried
//	consumer_parked_total{consumer}          counter   messages parked in the consumer dead-letter table
//	consumer_handler_seconds{consumer}       histogram time of one successful Handle (transaction included)
//	consumer_last_offset{consumer,topic,partition} gauge  offset of the last handled record
//	consumer_lag{consumer,topic,partition}   gauge     records behind: the partition's high watermark minus the offset after the last finished record
//
// The last_offset and lag series of a partition are removed when the
// runner stops handling it (revoked or lost), so that summing lag over the
// members of a group counts each partition once.
type Consumer struct {
	handled    *prometheus.CounterVec
	retries    *prometheus.CounterVec
	parked     *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	lastOffset *prometheus.GaugeVec
	lag        *prometheus.GaugeVec
}

// NewConsumer creates the consumer metrics and registers them with reg.
// One Consumer serves any number of runners; Hooks labels by name.
func NewConsumer(reg prometheus.Registerer) (*Consumer, error) {
	m := &Consumer{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "consumer", Name: "handled_total",
			Help: "Messages handled, by result: processed, or duplicate (a redelivery absorbed by the inbox)."}, []string{"consumer", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "consumer", Name: "retries_total",
			Help: "Failed handler attempts that will be retried."}, []string{"consumer"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "consumer", Name: "parked_total",
			Help: "Messages parked in the consumer dead-letter table."}, []string{"consumer"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outbox", Subsystem: "consumer", Name: "handler_seconds",
			Help:    "Time of one successful Handle, its database transaction included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"consumer"}),
		lastOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "consumer", Name: "last_offset",
			Help: "Offset of the last handled record per partition; lag is the partition's end offset minus this."}, []string{"consumer", "topic", "partition"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "consumer", Name: "lag",
			Help: "Records of the partition not yet handled: its high watermark (as of the last fetch or refresh) minus the offset after the last handled or parked record."},
			[]string{"consumer", "topic", "partition"}),
	}
	for _, c := range []prometheus.Collector{m.handled, m.retries, m.parked, m.latency, m.lastOffset, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Hooks returns consumer hooks that feed these metrics under the consumer
// name.
func (m *Consumer) Hooks(name string) consumer.Hooks {
	m.handled.WithLabelValues(name, "processed")
	m.handled.WithLabelValues(name, "duplicate")
	m.retries.WithLabelValues(name)
	m.parked.WithLabelValues(name)
	return consumer.Hooks{
		Handled: func(msg inbox.Message, res inbox.Result, latency time.Duration) {
			result := "processed"
			if res == inbox.Duplicate {
				result = "duplicate"
			}
			m.handled.WithLabelValues(name, result).Inc()
			m.latency.WithLabelValues(name).Observe(latency.Seconds())
			m.lastOffset.WithLabelValues(name, msg.Topic, itoa(msg.Partition)).Set(float64(msg.Offset))
		},
		Retried: func(inbox.Message, error) { m.retries.WithLabelValues(name).Inc() },
		Parked: func(msg inbox.Message, _ error) {
			m.parked.WithLabelValues(name).Inc()
			m.lastOffset.WithLabelValues(name, msg.Topic, itoa(msg.Partition)).Set(float64(msg.Offset))
		},
		Lag: func(topic string, partition int32, lag int64) {
			m.lag.WithLabelValues(name, topic, itoa(partition)).Set(float64(lag))
		},
		Unassigned: func(topic string, partition int32) {
			m.lag.DeleteLabelValues(name, topic, itoa(partition))
			m.lastOffset.DeleteLabelValues(name, topic, itoa(partition))
		},
	}
}

func itoa(p int32) string { return strconv.FormatInt(int64(p), 10) }
