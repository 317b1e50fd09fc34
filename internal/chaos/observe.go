package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// observe reads everything the checker needs: the harness's own records,
// the topics (with a client of its own, straight to the broker rather than
// through the proxy), the outbox and the consumers' tables.
func (h *harness) observe(ctx context.Context) Observations {
	h.mu.Lock()
	obs := Observations{
		Requests: append([]Request(nil), h.requests...),
		Faults:   append([]FaultWindow(nil), h.windows...),
	}
	for _, c := range h.relays {
		obs.Resources = append(obs.Resources, ResourceSeries{Relay: c.name, Samples: slices.Clone(h.resources[c.name])})
	}
	h.mu.Unlock()
	for _, q := range obs.Requests {
		if q.Kind == "poison" && q.Outcome != OutcomeRejected {
			obs.Poison = append(obs.Poison, q.EventID)
		}
	}
	fail := func(what string, err error) {
		obs.ReadErrors = append(obs.ReadErrors, fmt.Sprintf("%s: %v", what, err))
	}
	var err error
	if obs.Outbox, err = h.readOutbox(ctx); err != nil {
		fail("read the outbox", err)
	}
	if obs.Records, err = h.readTopics(ctx, []string{topicOrders, topicInventory, topicProbe}); err != nil {
		fail("read the topics", err)
	}
	if obs.Effects, err = h.readEffects(ctx); err != nil {
		fail("read the effects", err)
	}
	return obs
}

func (h *harness) table(schema, name string) string {
	return pgx.Identifier{schema, name}.Sanitize()
}

func (h *harness) readOutbox(ctx context.Context) ([]OutboxRow, error) {
	rows, err := h.pool.Query(ctx, `SELECT id::text, aggregate_type, aggregate_id, event_type, topic, `+h.statusOf("m")+`, seq, created_at,
  position($1::bytea in payload) > 0
FROM `+h.table(h.schemas.outbox, "outbox_messages")+` m ORDER BY seq`, []byte(rejectMarker))
	if err != nil {
		return nil, err
	}
	var out []OutboxRow
	var r OutboxRow
	var marked bool
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.AggregateType, &r.AggregateID, &r.EventType, &r.Topic, &r.Status, &r.Seq, &r.CreatedAt, &marked}, func() error {
		row := r
		if marked {
			row.Markers = []string{rejectMarker + "*"}
		}
		out = append(out, row)
		return nil
	})
	return out, err
}

// statusOf is the SQL of the status of outbox_messages row m as the store
// reports it (get.sql): a leased PENDING or FAILED message is IN_FLIGHT; a
// QUEUED message of cursor mode is SENT once the cursor's saved position
// passed it, PENDING before.
func (h *harness) statusOf(m string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s.status IN ('PENDING', 'FAILED') AND %[1]s.lease_token IS NOT NULL THEN 'IN_FLIGHT'
  WHEN %[1]s.status <> 'QUEUED' THEN %[1]s.status
  WHEN %[1]s.seq <= (SELECT c.position FROM %[2]s c) THEN 'SENT' ELSE 'PENDING' END`, m, h.table(h.schemas.outbox, "outbox_cursor"))
}

// readTopics reads every record of topics from the start to the end.
func (h *harness) readTopics(ctx context.Context, topics []string) ([]TopicRecord, error) {
	direct := strings.Replace(h.brokerProxy, "127.0.0.2:", "127.0.0.1:", 1)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	cl, err := kgo.NewClient(kgo.SeedBrokers(direct), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20),
		// The broker advertises the proxy; the checker goes around it.
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, strings.Replace(host, "127.0.0.2:", "127.0.0.1:", 1))
		}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The end of each partition, as the broker sees it now.
	ends, err := h.endOffsets(ctx, cl, topics)
	if err != nil {
		return nil, err
	}
	remaining := 0
	for _, e := range ends {
		if e > 0 {
			remaining++
		}
	}
	pos := map[string]int64{}
	var out []TopicRecord
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %d partitions to their end: %w", remaining, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // retried by the next poll
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			tr := TopicRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
			for _, hd := range r.Headers {
				switch hd.Key {
				case "eventId":
					tr.EventID = string(hd.Value)
				case "aggregateType":
					tr.AggregateType = string(hd.Value)
				case "aggregateId":
					tr.AggregateID = string(hd.Value)
				case "eventType":
					tr.EventType = string(hd.Value)
				}
			}
			var p struct {
				Version int64 `json:"version"`
			}
			if r.Topic == topicOrders && json.Unmarshal(r.Value, &p) == nil {
				tr.Version = p.Version
			}
			out = append(out, tr)
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			before := pos[k]
			pos[k] = r.Offset + 1
			if before < ends[k] && pos[k] >= ends[k] {
				remaining--
			}
		})
	}
	return out, nil
}

// endOffsets asks for the log end offset of every partition of topics.
func (h *harness) endOffsets(ctx context.Context, cl *kgo.Client, topics []string) (map[string]int64, error) {
	ends := map[string]int64{}
	for attempt := 0; ; attempt++ {
		err := listEnds(ctx, cl, topics, ends)
		if err == nil {
			return ends, nil
		}
		if attempt >= 20 || ctx.Err() != nil {
			return nil, fmt.Errorf("list end offsets: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (h *harness) readEffects(ctx context.Context) (Effects, error) {
	ef := Effects{
		Consumers: []string{"billing", "inventory-service"}, OrdersTopic: topicOrders,
		Processed: map[string]map[string]int{}, Invoices: map[string]int{}, Reservations: map[string]int{}, CreditNotes: map[string]int{},
		InvoiceStatus: map[string]string{}, ReservationStatus: map[string]string{}, Stock: map[string][2]int64{},
		InitialStock: initialStock, ReservedUnits: map[string]int64{}, ShippedUnits: map[string]int64{},
	}
	var (
		a, b string
		n    int
		x, y int64
	)
	each := func(q string, scan []any, fn func()) error {
		rows, err := h.pool.Query(ctx, q)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, scan, func() error { fn(); return nil })
		return err
	}
	steps := []struct {
		q    string
		scan []any
		fn   func()
	}{
		{`SELECT consumer, message_id::text, count(*) FROM ` + h.table(h.schemas.inbox, "inbox_processed") + ` GROUP BY 1, 2`, []any{&a, &b, &n}, func() {
			if ef.Processed[a] == nil {
				ef.Processed[a] = map[string]int{}
			}
			ef.Processed[a][b] = n
		}},
		{`SELECT id::text, status, version FROM ` + h.table(h.schemas.orders, "orders"), []any{&a, &b, &x}, func() {
			ef.Orders = append(ef.Orders, Order{ID: a, Status: b, Version: x})
		}},
		{`SELECT order_id, min(status), count(*) FROM ` + h.table(h.schemas.billing, "invoices") + ` GROUP BY 1`, []any{&a, &b, &n}, func() {
			ef.Invoices[a], ef.InvoiceStatus[a] = n, b
		}},
		{`SELECT order_id, count(*) FROM ` + h.table(h.schemas.billing, "credit_notes") + ` GROUP BY 1`, []any{&a, &n}, func() {
			ef.CreditNotes[a] = n
		}},
		{`SELECT order_id, min(status), count(*) FROM ` + h.table(h.schemas.inventory, "reservations") + ` GROUP BY 1`, []any{&a, &b, &n}, func() {
			ef.Reservations[a], ef.ReservationStatus[a] = n, b
		}},
		{`SELECT sku, available, reserved FROM ` + h.table(h.schemas.inventory, "stock"), []any{&a, &x, &y}, func() {
			ef.Stock[a] = [2]int64{x, y}
		}},
		{`SELECT r.status, i->>'sku', sum((i->>'quantity')::bigint) FROM ` + h.table(h.schemas.inventory, "reservations") +
			` r, jsonb_array_elements(r.items) i WHERE r.status IN ('RESERVED', 'SHIPPED') GROUP BY 1, 2`, []any{&a, &b, &x}, func() {
			if a == "RESERVED" {
				ef.ReservedUnits[b] = x
			} else {
				ef.ShippedUnits[b] = x
			}
		}},
		{`SELECT count(*) FROM ` + h.table(h.schemas.orders, "orders") + ` WHERE customer_id LIKE '` + rejectMarker + `%'`, []any{&n}, func() {
			ef.MarkerRows = n
		}},
	}
	for _, s := range steps {
		if err := each(s.q, s.scan, s.fn); err != nil {
			return ef, fmt.Errorf("%s: %w", s.q, err)
		}
	}
	return ef, nil
}

// listEnds fills ends with the log end offset of every partition of topics.
func listEnds(ctx context.Context, cl *kgo.Client, topics []string, ends map[string]int64) error {
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, mt)
	}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	for _, t := range mresp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("metadata of topic %s: %w", *t.Topic, err)
		}
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = *t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp = -1 // the end
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("end offset of %s/%d: %w", t.Topic, p.Partition, err)
			}
			ends[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.Offset
		}
	}
	return nil
}
