package metrics_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/sink"
)

// The example alert rules refer only to metrics this package exports, and
// every alert has a summary and a severity, so the file cannot silently rot
// when a metric is renamed.
func TestAlertRules_UseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("deploy/alerts.yml: %v", err)
	}
	exported := exportedNames(t)
	metricRe := regexp.MustCompile(`\boutbox_[a-z_]+`)
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity or summary", r)
			}
			for _, name := range metricRe.FindAllString(r.Expr, -1) {
				if !exported[name] {
					t.Errorf("alert %s uses %s, which package metrics does not export", r.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{"OutboxDeadLetters", "OutboxOldestUnsentTooOld", "OutboxRelayNotPublishing", "OutboxCursorStalled", "OutboxTopicUnavailable"} {
		if !strings.Contains(string(raw), "alert: "+want) {
			t.Errorf("deploy/alerts.yml lacks %s", want)
		}
	}
	if alerts == 0 {
		t.Fatal("no alert rules parsed")
	}
}

func exportedNames(t *testing.T) map[string]bool {
	reg := prometheus.NewRegistry()
	if _, err := metrics.NewRelay(reg); err != nil {
		t.Fatal(err)
	}
	if err := metrics.NewTable(reg, snapshotOf(), 0); err != nil {
		t.Fatal(err)
	}
	c, err := metrics.NewConsumer(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Hooks("billing").Lag("orders", 0, 0) // per-partition series exist once reported
	if err := metrics.NewSlotLag(reg, "outbox", func(context.Context) (metrics.SlotLag, error) { return metrics.SlotLag{}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := metrics.NewTopics(reg, func() []sink.TopicStatus { return []sink.TopicStatus{{Topic: "orders"}} }); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			names[n+suffix] = true
		}
	}
	return names
}
