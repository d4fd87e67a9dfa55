package delayq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// EnqueueOption sets a field of an enqueue (or, WithDelay and WithRunAt, of a reschedule).
type EnqueueOption func(*enqueueBody)

// enqueueBody is one job's enqueue body as the options set it, and the first error of a
// WithField.
type enqueueBody struct {
	wire.EnqueueRequest
	err error
}

// WithID gives the job its id: enqueueing the same id again stores nothing.
func WithID(id string) EnqueueOption { return func(b *enqueueBody) { b.ID = &id } }

// WithDelay makes the job due after d.
func WithDelay(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.DelayMs = ptr(float64(d) / float64(time.Millisecond)) }
}

// WithRunAt makes the job due at t.
func WithRunAt(t time.Time) EnqueueOption {
	return func(b *enqueueBody) { b.RunAt = t.UnixMilli() }
}

// WithMaxAttempts sets the deliveries before the job is dead-lettered (default 10).
func WithMaxAttempts(n int) EnqueueOption { return func(b *enqueueBody) { b.MaxAttempts = &n } }

// WithPriority sets its priority among due jobs, 0-9 (default 5; higher first).
func WithPriority(p int) EnqueueOption { return func(b *enqueueBody) { b.Priority = &p } }

// WithKey gives the job a key (a tenant, a customer, an upstream host: 1-128 bytes): the queue
// shares its claims among the keys with due jobs, and its key_max_in_flight and key_rate bound
// each key.
func WithKey(key string) EnqueueOption { return func(b *enqueueBody) { b.Key = &key } }

// WithReplace replaces an existing scheduled job of the same id (debounce) instead of keeping it.
func WithReplace() EnqueueOption {
	return func(b *enqueueBody) { b.OnConflict = ptr(wire.OnConflictReplace) }
}

// WithTimeout sets the longest one attempt may run.
func WithTimeout(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.TimeoutMs = ptr(d.Milliseconds()) }
}

// WithTraceparent carries this W3C trace context (and tracestate, may be empty) with the job,
// instead of the one WithTraceContext reads from the call's context.
func WithTraceparent(traceparent, tracestate string) EnqueueOption {
	return func(b *enqueueBody) {
		b.Traceparent = &traceparent
		b.Tracestate = nonZero(tracestate)
	}
}

// Backoff is a job's retry backoff: FixedBackoff, ExponentialBackoff or JitteredBackoff.
type Backoff struct {
	kind       string
	base, most time.Duration
}

// FixedBackoff waits d after every failure.
func FixedBackoff(d time.Duration) Backoff { return Backoff{kind: "fixed", base: d} }

// ExponentialBackoff waits base after the first failure, doubling each time up to most.
func ExponentialBackoff(base, most time.Duration) Backoff {
	return Backoff{kind: "exponential", base: base, most: most}
}

// JitteredBackoff is ExponentialBackoff with each wait picked in the upper half of it, so
// jobs that failed together do not retry together (the server's default, 1 s up to 10 min).
func JitteredBackoff(base, most time.Duration) Backoff {
	return Backoff{kind: "exponential_jitter", base: base, most: most}
}

func (bo Backoff) wire() *wire.Backoff {
	if bo.kind == "fixed" {
		return &wire.Backoff{Kind: bo.kind, DelayMs: ptr(bo.base.Milliseconds())}
	}
	return &wire.Backoff{Kind: bo.kind, BaseMs: ptr(bo.base.Milliseconds()), CapMs: ptr(bo.most.Milliseconds())}
}

// WithBackoff sets how the job waits between failed attempts.
func WithBackoff(bo Backoff) EnqueueOption {
	return func(b *enqueueBody) { b.Backoff = bo.wire() }
}

// WithLeaseLength gives each attempt of the job this lease, instead of the consumer's.
func WithLeaseLength(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.LeaseMs = ptr(d.Milliseconds()) }
}

// Target is where a pusher sends a job: URL, with Method (default POST) and Headers.
type Target struct {
	URL     string
	Method  string
	Headers map[string]string
}

// WithTarget has the job delivered by HTTP: a pusher (delayq serve --push) sends its payload
// to target at the due time (the queue must be a push queue).
func WithTarget(target Target) EnqueueOption {
	return func(b *enqueueBody) { b.Target = target.wire() }
}

// WithExpiresAt dead-letters the job with the error "expired" instead of starting it after t.
func WithExpiresAt(t time.Time) EnqueueOption {
	return func(b *enqueueBody) { b.ExpiresAt = t.UnixMilli() }
}

// WithExpireAfter is WithExpiresAt at d after the job's due time (the server's clock).
func WithExpireAfter(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.ExpireAfterMs = ptr(d.Milliseconds()) }
}

// WithKeepDone keeps the job readable as done for d after it completes (with its result).
func WithKeepDone(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.KeepDoneMs = ptr(d.Milliseconds()) }
}

// WithDedupe refuses the job's id again for d after it completes.
func WithDedupe(d time.Duration) EnqueueOption {
	return func(b *enqueueBody) { b.DedupeMs = ptr(d.Milliseconds()) }
}

// WithField sets a field of the API's enqueue body by its wire name, from any value that
// marshals to what the field takes (an unknown name or a value of the wrong type fails the
// enqueue with invalid_argument).
func WithField(name string, value any) EnqueueOption {
	return func(b *enqueueBody) {
		raw, err := json.Marshal(map[string]any{name: value})
		if err == nil {
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			err = d.Decode(&b.EnqueueRequest)
		}
		if err != nil && b.err == nil {
			b.err = &Error{Code: "invalid_argument", Message: fmt.Sprintf("WithField(%q): %v", name, err)}
		}
	}
}

// Enqueued is the answer to an enqueue.
type Enqueued struct {
	ID    string
	DueAt time.Time
	// Created is false when the id existed and nothing was written.
	Created bool
	// Replaced: with WithReplace, the scheduled job was replaced.
	Replaced bool
}

func jobBody(payload any, opts []EnqueueOption) (wire.EnqueueRequest, error) {
	var b enqueueBody
	var err error
	if b.Payload, b.PayloadB64, err = payloadFields(payload); err != nil {
		return b.EnqueueRequest, err
	}
	for _, o := range opts {
		o(&b)
	}
	if b.err != nil {
		return b.EnqueueRequest, b.err
	}
	// The id is given here, before the first try, so a retried enqueue stores nothing twice.
	if b.ID == nil {
		id := newID()
		// A keyed job's id ends with "~k" and the key's hash: a sharded Redis store keeps every
		// job of the key in the key's shard, as the server's own ids do.
		if key := val(b.Key); key != "" {
			id += "~k" + fnv1a64(key)
		}
		b.ID = &id
	}
	return b.EnqueueRequest, nil
}

// Enqueue stores one job (payload: any JSON-marshalable value, json.RawMessage as it is, or
// []byte for bytes). Retried safely on no answer or 503.
func (c *Client) Enqueue(ctx context.Context, queue string, payload any, opts ...EnqueueOption) (Enqueued, error) {
	b, err := jobBody(payload, opts)
	if err != nil {
		return Enqueued{}, err
	}
	var out wire.EnqueueResponse
	if err := c.call(ctx, "POST", q(queue)+"/jobs", b, &out, true); err != nil {
		return Enqueued{}, err
	}
	return enqueuedOf(out), nil
}

// BatchJob is one job of EnqueueBatch.
type BatchJob struct {
	Payload any
	Options []EnqueueOption
}

// EnqueueBatch stores 1-10,000 jobs atomically; one answer per job, in order.
func (c *Client) EnqueueBatch(ctx context.Context, queue string, jobs []BatchJob) ([]Enqueued, error) {
	bodies, err := batchBodies(jobs)
	if err != nil {
		return nil, err
	}
	var out []wire.EnqueueResponse
	if err := c.call(ctx, "POST", q(queue)+"/jobs", bodies, &out, true); err != nil {
		return nil, err
	}
	res := make([]Enqueued, len(out))
	for i, e := range out {
		res[i] = enqueuedOf(e)
	}
	return res, nil
}

// batchBodies are the request bodies of jobs (a batch's or a batch enqueue's).
func batchBodies(jobs []BatchJob) ([]wire.EnqueueRequest, error) {
	bodies := make([]wire.EnqueueRequest, 0, len(jobs))
	for _, j := range jobs {
		b, err := jobBody(j.Payload, j.Options)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, b)
	}
	return bodies, nil
}

// Get is one job in any state; ErrNotFound when there is none.
func (c *Client) Get(ctx context.Context, queue, id string) (*Job, error) {
	var w wire.JobView
	if err := c.call(ctx, "GET", jobPath(queue, id, ""), nil, &w, true); err != nil {
		// A missing job is the server's *Error (CodeOf: "not_found"), which errors.Is
		// matches to ErrNotFound.
		return nil, err
	}
	return jobFromView(w), nil
}

// CancelResult is what Cancel did.
type CancelResult string

// What Cancel answers.
const (
	Cancelled      CancelResult = "cancelled"
	CancelNotFound CancelResult = "not_found"
	CancelLeased   CancelResult = "leased"
	CancelDead     CancelResult = "dead"
	// Cancelling: the job was running (CancelRunning): it is ended cancelled now, and its
	// worker cancels the handler's ctx within a second.
	Cancelling CancelResult = "cancelling"
)

// CancelOption changes what Cancel does.
type CancelOption func(*cancelOpts)

type cancelOpts struct{ running bool }

// CancelRunning cancels the job even while a worker runs it: Cancel answers Cancelling, the
// job's lease is refused from now on (error code "cancelled") and its worker cancels the
// handler's ctx within a second. Without it a running job answers CancelLeased.
func CancelRunning() CancelOption { return func(o *cancelOpts) { o.running = true } }

// Cancel removes a scheduled job, or says why not.
func (c *Client) Cancel(ctx context.Context, queue, id string, opts ...CancelOption) (CancelResult, error) {
	var o cancelOpts
	for _, f := range opts {
		f(&o)
	}
	path := jobPath(queue, id, "")
	if o.running {
		path += "?running=true"
	}
	var out wire.Outcome
	err := c.call(ctx, "DELETE", path, nil, &out, true)
	switch CodeOf(err) {
	case "":
		if err != nil {
			return "", err
		}
		if out.Outcome == wire.OutcomeKindCancelling {
			return Cancelling, nil
		}
		return Cancelled, nil
	case "not_found":
		return CancelNotFound, nil
	case "job_leased":
		return CancelLeased, nil
	case "job_dead":
		return CancelDead, nil
	}
	return "", err
}

// Reschedule moves a scheduled job (WithDelay or WithRunAt); answers its new due time.
func (c *Client) Reschedule(ctx context.Context, queue, id string, due EnqueueOption) (time.Time, error) {
	var b enqueueBody
	due(&b)
	if b.err != nil {
		return time.Time{}, b.err
	}
	body := wire.RescheduleRequest{DelayMs: b.DelayMs, RunAt: b.RunAt}
	var out wire.Outcome
	if err := c.call(ctx, "PATCH", jobPath(queue, id, ""), body, &out, true); err != nil {
		return time.Time{}, err
	}
	return ms(out.DueAt), nil
}

// ListJobs calls fn for every job in state (scheduled, due, leased, dead, done), page after
// page of pageSize; an error from fn stops it.
func (c *Client) ListJobs(ctx context.Context, queue, state string, pageSize int, fn func(*Job) error) error {
	return c.pages(ctx, q(queue)+"/jobs", url.Values{"state": {state}, "limit": {strconv.Itoa(pageSize)}}, fn)
}

// pages calls fn with every job of the listing at path (query v), following next_cursor
// from page to page; fn's error stops the walk and is returned.
func (c *Client) pages(ctx context.Context, path string, v url.Values, fn func(*Job) error) error {
	for {
		var page wire.JobList
		if err := c.call(ctx, "GET", path+"?"+v.Encode(), nil, &page, true); err != nil {
			return err
		}
		for _, w := range page.Jobs {
			if err := fn(jobFromView(w)); err != nil {
				return err
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return nil
		}
		v.Set("cursor", *page.NextCursor)
	}
}

// Ack is a finished job to acknowledge, with its handler's result (Result: JSON; ResultB64:
// other bytes in base64; neither: none).
type Ack struct {
	ID         string
	LeaseToken int64
	Result     json.RawMessage
	ResultB64  string
}

// QueueAck is a finished job of a claim over several queues, with its queue.
type QueueAck struct {
	Queue      string
	ID         string
	LeaseToken int64
	Result     json.RawMessage
	ResultB64  string
}

// MaxResultBytes is the largest result a job keeps, in bytes (JSON text, or the bytes).
const MaxResultBytes = 65535

// QueueWeight is one queue of a claim over several, with its share among the queues with due
// jobs (0: 1).
type QueueWeight struct {
	Name   string
	Weight int
}

// ClaimManyOptions are the options of one claim over several queues.
type ClaimManyOptions struct {
	Max   int
	Lease time.Duration
	Wait  time.Duration
	// Strict serves the queues in the order given instead of by weight.
	Strict bool
	Acks   []QueueAck
	// PollID names the long poll: CutPoll on the first queue ends it.
	PollID string
}

// ClaimMany leases up to Max due jobs from several queues (POST /v1/claim): by weight among
// those with due jobs, or in the order given with Strict; with Wait, one long poll over all of
// them. Each job's Queue names its queue. Not retried.
func (c *Client) ClaimMany(ctx context.Context, queues []QueueWeight, o ClaimManyOptions) (Claimed, error) {
	b := wire.ClaimManyRequest{ClaimPoll: claimPoll(o.Max, o.Wait, o.Lease, o.PollID), Strict: nonZero(o.Strict)}
	for _, qw := range queues {
		b.Queues = append(b.Queues, wire.QueueClaim{Name: qw.Name, Weight: nonZero(qw.Weight)})
	}
	for _, a := range o.Acks {
		b.Acks = append(b.Acks, a.wire())
	}
	return c.claimAt(ctx, "/v1/claim", b, "")
}

// claimAt sends a claim body to path and decodes the answer; each job's Queue is queue when
// given (a one-queue claim), else what the answer names.
func (c *Client) claimAt(ctx context.Context, path string, b any, queue string) (Claimed, error) {
	var out wire.ClaimResponse
	if err := c.call(ctx, "POST", path, b, &out, false); err != nil {
		return Claimed{}, err
	}
	res := Claimed{Acks: outcomes(out.Acks)}
	for _, w := range out.Jobs {
		res.Jobs = append(res.Jobs, jobFromClaim(w, queue))
	}
	return res, nil
}

// ClaimOptions are the options of one claim.
type ClaimOptions struct {
	Max    int
	Lease  time.Duration
	Wait   time.Duration
	Acks   []Ack
	PollID string
}

// Claimed is what a claim answered.
type Claimed struct {
	Jobs []*Job
	// Acks says per ack the claim carried, in order: acked, lease_lost or not_found.
	Acks []string
}

// Claim leases up to Max due jobs, waiting up to Wait for one; its Acks are applied first.
// Not retried: a lost answer's jobs come back when their leases end.
func (c *Client) Claim(ctx context.Context, queue string, o ClaimOptions) (Claimed, error) {
	b := wire.ClaimRequest{ClaimPoll: claimPoll(o.Max, o.Wait, o.Lease, o.PollID)}
	for _, a := range o.Acks {
		b.Acks = append(b.Acks, a.wire())
	}
	return c.claimAt(ctx, q(queue)+"/claim", b, queue)
}

// claimPoll is what a claim of one queue and a claim over several both send: most jobs
// (default 1), how long to wait, the lease (the server's default when 0) and the poll's name.
func claimPoll(most int, wait, lease time.Duration, pollID string) wire.ClaimPoll {
	if most == 0 {
		most = 1
	}
	p := wire.ClaimPoll{Max: &most, WaitMs: ptr(wait.Milliseconds()), PollID: nonZero(pollID)}
	if lease > 0 {
		p.LeaseMs = ptr(lease.Milliseconds())
	}
	return p
}

// outcomes are ack outcomes as text (acked, lease_lost, not_found).
func outcomes(acks []wire.AckOutcome) []string {
	out := make([]string, len(acks))
	for i, a := range acks {
		out[i] = string(a)
	}
	return out
}

// CutPoll ends the waiting claim named pollID now.
func (c *Client) CutPoll(ctx context.Context, queue, pollID string) error {
	return c.call(ctx, "DELETE", q(queue)+"/polls/"+url.PathEscape(pollID), nil, nil, false)
}

// Ack completes a job (lease_lost when its lease moved on).
func (c *Client) Ack(ctx context.Context, queue, id string, leaseToken int64) error {
	return c.call(ctx, "POST", jobPath(queue, id, "/ack"), wire.AckRequest{LeaseToken: leaseToken}, nil, true)
}

// AckWithResult completes a job and keeps result with it (any value encoding/json can
// marshal, or a []byte kept as bytes; at most MaxResultBytes) while its queue keeps done jobs
// (keep_done_ms); Get answers it as Job.Result (or Job.ResultBytes).
func (c *Client) AckWithResult(ctx context.Context, queue, id string, leaseToken int64, result any) error {
	raw, b64, err := resultFields(result)
	if err != nil {
		return err
	}
	b := wire.AckRequest{LeaseToken: leaseToken, Result: raw, ResultB64: nonZero(b64)}
	return c.call(ctx, "POST", jobPath(queue, id, "/ack"), b, nil, true)
}

// AckBatch completes up to 1,000 jobs; per ack acked, lease_lost or not_found.
func (c *Client) AckBatch(ctx context.Context, queue string, acks []Ack) ([]string, error) {
	b := wire.AckBatchRequest{Acks: make([]wire.ClaimAck, len(acks))}
	for i, a := range acks {
		b.Acks[i] = a.wire()
	}
	var out wire.AckBatchResponse
	err := c.call(ctx, "POST", q(queue)+"/acks", b, &out, true)
	return outcomes(out.Acks), err
}

// LeaseOf names a lease: its job's queue and id, and the claim's token.
type LeaseOf struct {
	Queue      string
	ID         string
	LeaseToken int64
}

// CancelledLeases answers which of leases were cancelled while their jobs ran (Cancel with
// CancelRunning): a worker asks about the jobs it runs and cancels their handlers.
func (c *Client) CancelledLeases(ctx context.Context, leases []LeaseOf) ([]LeaseOf, error) {
	b := wire.CancelledRequest{Leases: make([]wire.LeaseOf, len(leases))}
	for i, l := range leases {
		b.Leases[i] = wire.LeaseOf{Queue: l.Queue, ID: l.ID, LeaseToken: l.LeaseToken}
	}
	var out wire.CancelledResponse
	if err := c.call(ctx, "POST", "/v1/leases/cancelled", b, &out, true); err != nil {
		return nil, err
	}
	found := make([]LeaseOf, len(out.Cancelled))
	for i, l := range out.Cancelled {
		found[i] = LeaseOf{Queue: l.Queue, ID: l.ID, LeaseToken: l.LeaseToken}
	}
	return found, nil
}

// NackOptions say how an attempt failed.
type NackOptions struct {
	Error   string
	RetryIn *time.Duration
	Dead    bool
}

// Nack fails an attempt: answers "retrying" or "dead".
func (c *Client) Nack(ctx context.Context, queue, id string, leaseToken int64, o NackOptions) (string, error) {
	b := wire.NackRequest{LeaseToken: leaseToken, Dead: &o.Dead, Error: nonZero(o.Error)}
	if o.RetryIn != nil {
		b.RetryInMs = ptr(o.RetryIn.Milliseconds())
	}
	var out wire.Outcome
	err := c.call(ctx, "POST", jobPath(queue, id, "/nack"), b, &out, false)
	return string(out.Outcome), err
}

// Extend extends a lease to lease from now; answers the new deadline.
func (c *Client) Extend(ctx context.Context, queue, id string, leaseToken int64, lease time.Duration) (time.Time, error) {
	var out wire.Outcome
	b := wire.ExtendRequest{LeaseToken: leaseToken, LeaseMs: ptr(lease.Milliseconds())}
	err := c.call(ctx, "POST", jobPath(queue, id, "/extend"), b, &out, true)
	return ms(out.LeaseDeadline), err
}

// Release gives a lease back: the job is due again at once (the attempt not counted).
func (c *Client) Release(ctx context.Context, queue, id string, leaseToken int64) error {
	b := wire.ReleaseRequest{LeaseToken: leaseToken, UndoAttempt: ptr(true)}
	return c.call(ctx, "POST", jobPath(queue, id, "/release"), b, nil, true)
}

// fnv1a64 is FNV-1a (64-bit) of s's bytes, as 16 hex digits.
func fnv1a64(s string) string {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return fmt.Sprintf("%016x", h)
}
