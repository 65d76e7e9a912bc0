// Package redlockotel reports the operations of a redlock.Client as
// OpenTelemetry metrics and traces.
//
//	obs, err := redlockotel.New()
//	client, err := redlock.New(nodes, redlock.WithObserver(obs))
//
// It lives in its own module so that the lock client itself does not depend
// on OpenTelemetry.
//
// # Metrics
//
//   - redlock.operation.duration (histogram, s): how long each lock attempt,
//     extension and unlock took to decide, by redlock.operation and
//     redlock.result ("ok", "canceled", or the error kind: "locked",
//     "unavailable", "expired", "superseded", "no_validity", "auth",
//     "no_permission", "script", "not_provisioned", "amnesia", ... one per
//     sentinel error of package redlock (see Result), or "error").
//   - redlock.node.calls (counter): one per node per round, by
//     redlock.operation, redlock.node (its index in the list given to
//     redlock.New) and redlock.node.outcome ("granted", "refused",
//     "failed", "timed_out", "no_reply", "amnesiac"). A node that keeps
//     timing out or failing shows here long before it costs a quorum.
//   - redlock.node.duration (histogram, s): each node's time to answer, by
//     redlock.operation and redlock.node.
//
// Lock names are not metric attributes: they are unbounded.
//
// # Traces
//
// Each operation becomes a client span, "redlock.lock", "redlock.extend" or
// "redlock.unlock", a child of the span in the caller's context, with the
// operation's real start and end times. It carries the lock name, the
// fencing token and the number of nodes that granted, and one span event per
// node that answered, at the time its answer came. A failed operation has
// status Error.
package redlockotel

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/quorumlock/redlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/quorumlock/redlock/redlockotel"

// Observer is a redlock.Observer that records metrics and spans.
type Observer struct {
	tracer      trace.Tracer
	opDuration  metric.Float64Histogram
	nodeCalls   metric.Int64Counter
	nodeLatency metric.Float64Histogram
	nodeAttrs   []attribute.KeyValue // redlock.node values, cached
}

var _ redlock.Observer = (*Observer)(nil)

// An Option configures New.
type Option func(*options)

type options struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider records metrics with mp instead of the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithTracerProvider records spans with tp instead of the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// latencyBuckets suit calls that take a millisecond on a LAN and are cut off
// at a node timeout of tens of milliseconds (seconds).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New returns an Observer that uses the global OpenTelemetry providers
// unless options say otherwise.
func New(opts ...Option) (*Observer, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	meter := o.mp.Meter(ScopeName)
	obs := &Observer{tracer: o.tp.Tracer(ScopeName)}
	for i := range redlock.MaxFencingNodes {
		obs.nodeAttrs = append(obs.nodeAttrs, attribute.String("redlock.node", strconv.Itoa(i)))
	}
	var err, e error
	obs.opDuration, e = meter.Float64Histogram("redlock.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Time for a lock attempt, extension or unlock to be decided."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	err = errors.Join(err, e)
	obs.nodeCalls, e = meter.Int64Counter("redlock.node.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls to each node, by outcome."))
	err = errors.Join(err, e)
	obs.nodeLatency, e = meter.Float64Histogram("redlock.node.duration", metric.WithUnit("s"),
		metric.WithDescription("Each node's time to answer."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return obs, nil
}

// Observe records one operation. It is called by the redlock client.
func (o *Observer) Observe(ctx context.Context, ev redlock.Event) {
	opAttr := attribute.String("redlock.operation", ev.Op)
	result := Result(ev.Err)
	o.opDuration.Record(ctx, ev.Elapsed.Seconds(),
		metric.WithAttributes(opAttr, attribute.String("redlock.result", result)))
	o.recordNodes(ctx, opAttr, ev.Nodes)
	o.recordNodes(ctx, attribute.String("redlock.operation", ev.Op+".commit"), ev.Commit)
	o.span(ctx, ev, result)
}

func (o *Observer) recordNodes(ctx context.Context, opAttr attribute.KeyValue, nodes []redlock.NodeResult) {
	for _, n := range nodes {
		na := o.nodeAttr(n.Node)
		o.nodeCalls.Add(ctx, 1, metric.WithAttributes(opAttr, na,
			attribute.String("redlock.node.outcome", outcomeName(n.Outcome))))
		if n.Outcome != redlock.NodeNoReply {
			o.nodeLatency.Record(ctx, n.Latency.Seconds(), metric.WithAttributes(opAttr, na))
		}
	}
}

func (o *Observer) span(ctx context.Context, ev redlock.Event, result string) {
	granted := 0
	for _, n := range ev.Nodes {
		if n.Outcome == redlock.NodeGranted {
			granted++
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("redlock.name", ev.Name),
		attribute.Int("redlock.nodes", len(ev.Nodes)),
		attribute.Int("redlock.granted", granted),
		attribute.String("redlock.result", result),
	}
	if ev.Token != 0 {
		attrs = append(attrs, attribute.Int64("redlock.token", int64(ev.Token)))
	}
	if ev.Validity > 0 {
		attrs = append(attrs, attribute.Float64("redlock.validity_s", ev.Validity.Seconds()))
	}
	_, span := o.tracer.Start(ctx, "redlock."+ev.Op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(ev.Start), trace.WithAttributes(attrs...))
	o.nodeEvents(span, ev.Start, "node", ev.Nodes)
	commitStart := ev.Start
	if len(ev.Nodes) > 0 {
		commitStart = ev.Start.Add(slowestAnswer(ev.Nodes))
	}
	o.nodeEvents(span, commitStart, "commit", ev.Commit)
	if ev.Err != nil {
		span.RecordError(ev.Err, trace.WithTimestamp(ev.Start.Add(ev.Elapsed)))
		span.SetStatus(codes.Error, result)
	}
	span.End(trace.WithTimestamp(ev.Start.Add(ev.Elapsed)))
}

func (o *Observer) nodeEvents(span trace.Span, start time.Time, name string, nodes []redlock.NodeResult) {
	for _, n := range nodes {
		if n.Outcome == redlock.NodeNoReply {
			continue
		}
		attrs := []attribute.KeyValue{o.nodeAttr(n.Node), attribute.String("redlock.node.outcome", outcomeName(n.Outcome))}
		if n.Err != nil {
			attrs = append(attrs, attribute.String("error", n.Err.Error()))
		}
		span.AddEvent(name, trace.WithTimestamp(start.Add(n.Latency)), trace.WithAttributes(attrs...))
	}
}

// slowestAnswer approximates when the first round ended, to place the commit
// round's events.
func slowestAnswer(nodes []redlock.NodeResult) time.Duration {
	var d time.Duration
	for _, n := range nodes {
		d = max(d, n.Latency)
	}
	return d
}

func (o *Observer) nodeAttr(i int) attribute.KeyValue {
	if i < len(o.nodeAttrs) {
		return o.nodeAttrs[i]
	}
	return attribute.String("redlock.node", strconv.Itoa(i))
}

// Result is the low-cardinality label for an operation's error: "ok" for
// nil, "canceled" when the caller's context ended it, else the kind of
// failure, one label per sentinel error of package redlock (several share
// one: the bad-name errors are "bad_name" (a multi-lock's name list too),
// the configuration errors of New are "bad_config" (ErrNilOption and
// ErrSpansSlots too, from any call), a nil function given to Do and the
// lock family's misuses (ErrNotForExtend, ErrBadPermits,
// ErrDowngradeReentered) are "bad_input", ErrReleased counts as
// "expired"). An error that matches none is "error".
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	for _, l := range resultLabels {
		if errors.Is(err, l.err) {
			return l.label
		}
	}
	return "error"
}

// resultLabels is checked in order: ErrNodeHung wraps ErrNodeTimeout, so it
// comes first. The test fails when errors.go gains a sentinel missing here.
var resultLabels = []struct {
	err   error
	label string
}{
	{redlock.ErrLocked, "locked"},
	{redlock.ErrUnavailable, "unavailable"},
	{redlock.ErrNoValidity, "no_validity"},
	{redlock.ErrExpired, "expired"},
	{redlock.ErrReleased, "expired"},
	{redlock.ErrSuperseded, "superseded"},
	{redlock.ErrAmnesia, "amnesia"},
	{redlock.ErrNotProvisioned, "not_provisioned"},
	{redlock.ErrRepairTooSoon, "repair_too_soon"},
	{redlock.ErrTokenRange, "token_range"},
	{redlock.ErrNodeIDConflict, "node_id_conflict"},
	{redlock.ErrWrongNodeList, "wrong_node_list"},
	{redlock.ErrWrongType, "wrong_type"},
	{redlock.ErrAuth, "auth"},
	{redlock.ErrNoPermission, "no_permission"},
	{redlock.ErrScript, "script"},
	{redlock.ErrLockLost, "lock_lost"},
	{redlock.ErrNodeHung, "node_hung"},
	{redlock.ErrNodeTimeout, "node_timeout"},
	{redlock.ErrBadNode, "bad_node"},
	{redlock.ErrEmptyName, "bad_name"},
	{redlock.ErrNameTooLong, "bad_name"},
	{redlock.ErrBadName, "bad_name"},
	{redlock.ErrClosed, "closed"},
	{redlock.ErrNoNodes, "bad_config"},
	{redlock.ErrNilNode, "bad_config"},
	{redlock.ErrDuplicateNode, "bad_config"},
	{redlock.ErrTTLTooShort, "bad_config"},
	{redlock.ErrBadDriftFactor, "bad_config"},
	{redlock.ErrBadNodeTimeout, "bad_config"},
	{redlock.ErrNoValidityBudget, "bad_config"},
	{redlock.ErrBadRetryDelay, "bad_config"},
	{redlock.ErrBadMaxOutage, "bad_config"},
	{redlock.ErrRetentionTooShort, "bad_config"},
	{redlock.ErrTooManyNodes, "bad_config"},
	{redlock.ErrFencingNode, "bad_config"},
	{redlock.ErrBadKeyPrefix, "bad_config"},
	{redlock.ErrTTLTooLong, "bad_config"},
	{redlock.ErrNilOption, "bad_config"},
	{redlock.ErrNilFunc, "bad_input"},
	{redlock.ErrPermits, "permits"},
	{redlock.ErrHeldByContext, "held_by_context"},
	{redlock.ErrCannotReenter, "bad_input"},
	{redlock.ErrNoLeader, "no_leader"},
	{redlock.ErrNotLeader, "not_leader"},
	{redlock.ErrResigned, "resigned"},
	{redlock.ErrUpgrade, "upgrade"},
	{redlock.ErrReadUnderWrite, "read_under_write"},
	{redlock.ErrSpansSlots, "bad_config"},
	{redlock.ErrNotForExtend, "bad_input"},
	{redlock.ErrBadID, "bad_input"},
	{redlock.ErrBadPermits, "bad_input"},
	{redlock.ErrDowngradeReentered, "bad_input"},
	{redlock.ErrNoNames, "bad_name"},
	{redlock.ErrTooManyNames, "bad_name"},
	{redlock.ErrDuplicateName, "bad_name"},
}

var outcomeNames = map[redlock.Outcome]string{
	redlock.NodeNoReply:  "no_reply",
	redlock.NodeGranted:  "granted",
	redlock.NodeRefused:  "refused",
	redlock.NodeFailed:   "failed",
	redlock.NodeTimedOut: "timed_out",
	redlock.NodeAmnesiac: "amnesiac",
}

func outcomeName(o redlock.Outcome) string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return "unknown"
}
