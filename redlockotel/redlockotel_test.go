package redlockotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/quorumlock/redlock/redlockotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Three real nodes, one held by a stranger: the metrics and spans must show
// the per-node outcomes, and a contended attempt must show as "locked".
func TestMetricsAndSpansFromRealOperations(t *testing.T) {
	ctx := context.Background()
	g, err := node.StartProcesses(ctx, 3, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	clients := g.NewClients()
	defer node.CloseClients(clients)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)

	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	c, err := redlock.New(clients, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clients[2].Set(ctx, "redlock:{job}", "stranger", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	// A parent span: the lock spans must be its children.
	parentCtx, parent := tp.Tracer("test").Start(ctx, "parent")
	l, err := c.TryLock(parentCtx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(parentCtx, "job"); !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("second TryLock: %v", err)
	}
	if err := l.Unlock(parentCtx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	// Spans.
	var lockSpans, unlockSpans []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "redlock.lock":
			lockSpans = append(lockSpans, s)
		case "redlock.unlock":
			unlockSpans = append(unlockSpans, s)
		}
	}
	if len(lockSpans) != 2 || len(unlockSpans) != 1 {
		t.Fatalf("spans: %d lock, %d unlock", len(lockSpans), len(unlockSpans))
	}
	ok, locked := lockSpans[0], lockSpans[1]
	for _, s := range []sdktrace.ReadOnlySpan{ok, locked, unlockSpans[0]} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s: not a child of the caller's span", s.Name())
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Errorf("%s: start %v end %v", s.Name(), s.StartTime(), s.EndTime())
		}
	}
	if got := attr(ok.Attributes(), "redlock.token"); got.AsInt64() != int64(l.Token()) || l.Token() == 0 {
		t.Errorf("token attribute %v, lock token %d", got, l.Token())
	}
	if got := attr(ok.Attributes(), "redlock.granted").AsInt64(); got != 2 {
		t.Errorf("granted = %d, want 2 (node 2 held by a stranger)", got)
	}
	if ok.Status().Code == codes.Error || locked.Status().Code != codes.Error {
		t.Errorf("status: ok span %v, locked span %v", ok.Status(), locked.Status())
	}
	if got := attr(locked.Attributes(), "redlock.result").AsString(); got != "locked" {
		t.Errorf("locked span result %q", got)
	}
	nodeEvents := 0
	for _, e := range ok.Events() {
		if e.Name == "node" {
			nodeEvents++
			if e.Time.Before(ok.StartTime()) || e.Time.After(ok.EndTime()) {
				t.Errorf("node event at %v outside the span %v..%v", e.Time, ok.StartTime(), ok.EndTime())
			}
		}
	}
	if nodeEvents < 2 {
		t.Errorf("%d node events on the lock span", nodeEvents)
	}

	// Metrics.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	calls := sumBy(t, rm, "redlock.node.calls", "redlock.operation", "redlock.node", "redlock.node.outcome")
	// The first attempt needed both free nodes; the stranger's node never
	// granted. Which node a decided round did not wait for varies.
	if calls["lock/0/granted"] != 1 || calls["lock/1/granted"] != 1 || calls["lock/2/granted"] != 0 {
		t.Errorf("grants: %v", calls)
	}
	perOp := map[string]int64{}
	for k, v := range calls {
		perOp[k[:strings.IndexByte(k, '/')]] += v
	}
	if perOp["lock"] != 2*3 || perOp["lock.commit"] != 3 || perOp["unlock"] != 3 {
		t.Errorf("calls per operation %v, want one per node per round: %v", perOp, calls)
	}
	if committed := calls["lock.commit/0/granted"] + calls["lock.commit/1/granted"] + calls["lock.commit/2/granted"]; committed < 2 {
		t.Errorf("commit grants: %v", calls)
	}
	durations := countBy(t, rm, "redlock.operation.duration", "redlock.operation", "redlock.result")
	if durations["lock/ok"] != 1 || durations["lock/locked"] != 1 || durations["unlock/ok"] != 1 {
		t.Errorf("operation durations: %v", durations)
	}
}

func TestResultNamesTheErrorKinds(t *testing.T) {
	for err, want := range map[error]string{
		nil:                    "ok",
		redlock.ErrLocked:      "locked",
		redlock.ErrUnavailable: "unavailable",
		&redlock.QuorumError{Kind: redlock.ErrLocked, Cause: context.Canceled}: "canceled",
		&redlock.QuorumError{Kind: redlock.ErrExpired}:                         "expired",
		errors.New("other"): "error",
	} {
		if got := redlockotel.Result(err); got != want {
			t.Errorf("Result(%v) = %q, want %q", err, got, want)
		}
	}
}

func attr(kvs []attribute.KeyValue, key string) attribute.Value {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

func key(set attribute.Set, keys []string) string {
	s := ""
	for i, k := range keys {
		v, _ := set.Value(attribute.Key(k))
		if i > 0 {
			s += "/"
		}
		s += v.String()
	}
	return s
}

func sumBy(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...string) map[string]int64 {
	out := map[string]int64{}
	for _, dp := range find(t, rm, name).Data.(metricdata.Sum[int64]).DataPoints {
		out[key(dp.Attributes, keys)] += dp.Value
	}
	return out
}

func countBy(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...string) map[string]uint64 {
	out := map[string]uint64{}
	for _, dp := range find(t, rm, name).Data.(metricdata.Histogram[float64]).DataPoints {
		out[key(dp.Attributes, keys)] += dp.Count
	}
	return out
}
