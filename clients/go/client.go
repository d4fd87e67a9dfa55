// Package delayq is the Go client of a delayq server's HTTP API: enqueue jobs that run at a
// future time, run workers, verify the webhooks `delayq serve --push` sends. Standard library
// only.
package delayq

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// Client calls one delayq server. Safe for concurrent use.
type Client struct {
	base    string
	token   string
	http    *http.Client
	retries int
	trace   func(ctx context.Context) (traceparent, tracestate string)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends Authorization: Bearer <t> with every request.
func WithToken(t string) Option { return func(c *Client) { c.token = t } }

// WithHTTPClient uses h (its Timeout bounds each request; a claim's wait comes on top of
// nothing, so give long polls room).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithTraceContext reads the W3C trace context of a call's ctx (traceparent, tracestate) so
// that enqueued jobs carry the caller's trace. With OpenTelemetry (not a dependency of this
// module), for example:
//
//	delayq.WithTraceContext(func(ctx context.Context) (string, string) {
//		c := propagation.MapCarrier{}
//		otel.GetTextMapPropagator().Inject(ctx, c)
//		return c["traceparent"], c["tracestate"]
//	})
func WithTraceContext(f func(ctx context.Context) (traceparent, tracestate string)) Option {
	return func(c *Client) { c.trace = f }
}

// WithRetries sets how many times a call that is safe to repeat is sent again (default 3).
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// NewClient is a client of the server at baseURL (http://127.0.0.1:7070).
func NewClient(baseURL string, opts ...Option) *Client {
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 50 * time.Second}},
		retries: 3,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call sends one request (again, when repeat and the failure is retryable) and decodes a 2xx
// answer into out (when not nil).
func (c *Client) call(ctx context.Context, method, path string, body, out any, repeat bool) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return &Error{Code: "bad_request", Message: err.Error()}
		}
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, path, data, body != nil, out)
		var e *Error
		if err == nil || !repeat || attempt >= c.retries || !errors.As(err, &e) || !e.Retryable() {
			return err
		}
		wait := time.Duration(200<<attempt) * time.Millisecond
		if e.RetryAfter > 0 {
			wait = time.Duration(e.RetryAfter) * time.Second
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, data []byte, hasBody bool, out any) error {
	if !strings.HasPrefix(c.base, "http://") && !strings.HasPrefix(c.base, "https://") {
		return &Error{Code: "bad_request", Message: fmt.Sprintf("base URL %q: expected http://HOST:PORT", c.base)}
	}
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return &Error{Code: "bad_request", Message: err.Error()}
	}
	if hasBody {
		req.Header.Set("content-type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("authorization", "Bearer "+c.token)
	}
	if c.trace != nil {
		if tp, ts := c.trace(ctx); tp != "" {
			req.Header.Set("traceparent", tp)
			if ts != "" {
				req.Header.Set("tracestate", ts)
			}
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return &Error{Code: "timeout", Message: fmt.Sprintf("%s %s: %v", method, path, ctx.Err())}
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			return &Error{Code: "timeout", Message: err.Error()}
		}
		return &Error{Code: "connection_failed", Message: err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return &Error{Code: "connection_failed", Message: err.Error()}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil || len(raw) == 0 {
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return &Error{Code: "bad_answer", Status: resp.StatusCode, Message: err.Error()}
		}
		return nil
	}
	var b wire.ErrorBody
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(raw, &b) == nil && b.Code != "" {
		e.Code, e.Message = b.Code, b.Message
		if b.State != nil {
			e.State = string(*b.State)
		}
	} else {
		e.Code, e.Message = fmt.Sprintf("http_%d", resp.StatusCode), string(raw)
		if resp.StatusCode == 503 {
			e.Code = "unavailable"
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("retry-after")); err == nil {
		e.RetryAfter = s
	}
	return e
}

func q(queue string) string { return "/v1/queues/" + url.PathEscape(queue) }

func jobPath(queue, id, rest string) string { return q(queue) + "/jobs/" + url.PathEscape(id) + rest }

// SetResult keeps v (any value encoding/json can marshal, or a []byte kept as bytes; at most
// MaxResultBytes) as the job's result when the handler returns nil: it stays with the job
// while its queue keeps done jobs (keep_done_ms), and Get answers it.
func (j *Job) SetResult(v any) error {
	raw, b64, err := resultFields(v)
	if err != nil {
		return err
	}
	j.Result, j.ResultBytes = raw, nil
	if b64 != "" {
		j.ResultBytes, _ = base64.StdEncoding.DecodeString(b64)
		if j.ResultBytes == nil {
			j.ResultBytes = []byte{}
		}
	}
	return nil
}

// ack is how the job is acknowledged in queue: with its result, when it has one.
func (j *Job) ack() QueueAck {
	a := QueueAck{Queue: j.Queue, ID: j.ID, LeaseToken: j.LeaseToken, Result: j.Result}
	if j.ResultBytes != nil {
		a.ResultB64 = base64.StdEncoding.EncodeToString(j.ResultBytes)
	}
	return a
}

// resultSize is the size of the job's result as sent (0: none).
func (j *Job) resultSize() int {
	if j.ResultBytes != nil {
		return len(j.ResultBytes)
	}
	return len(j.Result)
}

// Job is a job: stored (Get, listings) or leased (Claim, a worker's handler).
type Job struct {
	ID string
	// Payload is the JSON payload as stored, byte for byte (nil when it is not JSON: see Bytes).
	Payload json.RawMessage
	// Bytes holds a payload that is not JSON.
	Bytes       []byte
	Attempt     int
	MaxAttempts int
	DueAt       time.Time
	CreatedAt   time.Time
	// State is scheduled, leased, dead or done (due in a listing of due jobs).
	State     string
	LastError string
	Priority  int
	// LeaseToken is the claim's fencing token (leased jobs): give it back with Ack and Nack.
	LeaseToken    int64
	LeaseDeadline time.Time
	FailedAt      time.Time
	// Timeout is the longest one attempt may run (0: no limit).
	Timeout time.Duration
	// Traceparent and Tracestate are the W3C trace context the job was enqueued with (empty
	// without one): continue its trace from them.
	Traceparent string
	Tracestate  string
	// Queue is the job's queue (a claimed job: the queue it was claimed from).
	Queue string
	// Key is the job's key (empty without one).
	Key string
	// Result is a done job's result as JSON, byte for byte (nil when it has none, or when it
	// is not JSON: see ResultBytes); in a handler, what SetResult set.
	Result json.RawMessage
	// ResultBytes holds a result that is not JSON.
	ResultBytes []byte
	// Dependencies are a job's dependencies and how each stands (Get of a job enqueued
	// WithDependsOn; a claim of one enqueued WithDependencyResults, with their results).
	Dependencies []Dependency
	// Tier is "cold" when the job is kept in the cold tier (PostgreSQL beside the store, for
	// a far due time); empty when it is in the store.
	Tier string
}
