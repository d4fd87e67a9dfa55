package delayq

// Batches: jobs enqueued together whose ends — each acked, dead or cancelled — enqueue a
// callback once (POST /v1/queues/{q}/batches and the calls beside it).

import (
	"context"
	"fmt"
	"net/url"
)

// BatchCallback is a job enqueued once when a batch is done: Payload (a JSON object) gains
// batch: {id, total, succeeded, dead, cancelled}.
type BatchCallback struct {
	Queue   string         `json:"queue"`
	Payload map[string]any `json:"payload"`
	DelayMs int64          `json:"delay_ms,omitempty"`
}

// BatchOptions say how CreateBatch makes a batch.
type BatchOptions struct {
	// ID is the batch's id; the server makes one when it is nil.
	ID *string
	// OnComplete is enqueued as batch-<id>-complete when every job has ended.
	OnComplete *BatchCallback
	// OnSuccess is enqueued as batch-<id>-success when every job has ended and none is dead.
	OnSuccess *BatchCallback
	// Open keeps the batch open: AddToBatch adds jobs until CloseBatch.
	Open bool
	// IncludeResults makes the callbacks carry the jobs' results.
	IncludeResults bool
}

// Batch is a batch and how its jobs stand. State is "open" (jobs may join), "closed"
// (waiting for its jobs), "done" (its callbacks enqueued) or "callback_failed" (its jobs
// ended but its callbacks could not be enqueued: CallbackError says why; tried again with a
// backoff).
type Batch struct {
	ID          string `json:"id"`
	Queue       string `json:"queue"`
	State       string `json:"state"`
	Total       int64  `json:"total"`
	Pending     int64  `json:"pending"`
	Succeeded   int64  `json:"succeeded"`
	Dead        int64  `json:"dead"`
	Cancelled   int64  `json:"cancelled"`
	CreatedAtMs int64  `json:"created_at_ms"`
	DoneAtMs    *int64 `json:"done_at_ms"`
	// CallbackError is why its callbacks could not be enqueued (state "callback_failed").
	CallbackError *string `json:"callback_error"`
	// CallbackAttempts counts their failed tries.
	CallbackAttempts *int64 `json:"callback_attempts"`
	// CallbackNextTryAtMs is their next try, ms since the epoch.
	CallbackNextTryAtMs *int64 `json:"callback_next_try_at_ms"`
}

func callbackBody(cb *BatchCallback) map[string]any {
	p := cb.Payload
	if p == nil {
		p = map[string]any{}
	}
	b := map[string]any{"queue": cb.Queue, "payload": p}
	if cb.DelayMs > 0 {
		b["delay_ms"] = cb.DelayMs
	}
	return b
}

// CreateBatch creates a batch of jobs: when every one has ended its callbacks are enqueued
// once. It is closed at once unless o.Open; an open batch of that id gains the jobs instead
// (ErrConflict once it is closed). Sent once: a retry after a call that closed the batch would
// be refused.
func (c *Client) CreateBatch(ctx context.Context, queue string, jobs []BatchJob, o BatchOptions) (Batch, error) {
	bodies, err := batchBodies(jobs)
	if err != nil {
		return Batch{}, err
	}
	body := map[string]any{"jobs": bodies, "open": o.Open, "include_results": o.IncludeResults}
	if o.ID != nil {
		body["id"] = *o.ID
	}
	if o.OnComplete != nil {
		body["on_complete"] = callbackBody(o.OnComplete)
	}
	if o.OnSuccess != nil {
		body["on_success"] = callbackBody(o.OnSuccess)
	}
	var out struct {
		Batch Batch `json:"batch"`
	}
	err = c.call(ctx, "POST", q(queue)+"/batches", body, &out, false)
	return out.Batch, err
}

// AddToBatch adds jobs to an open batch (ErrConflict once it is closed), closing it after
// them when close is true.
func (c *Client) AddToBatch(ctx context.Context, queue, id string, jobs []BatchJob, close bool) (Batch, error) {
	bodies, err := batchBodies(jobs)
	if err != nil {
		return Batch{}, err
	}
	var out struct {
		Batch Batch `json:"batch"`
	}
	err = c.call(ctx, "POST", q(queue)+"/batches/"+url.PathEscape(id)+"/jobs",
		map[string]any{"jobs": bodies, "close": close}, &out, false)
	return out.Batch, err
}

// CloseBatch closes a batch: no job joins it any more.
func (c *Client) CloseBatch(ctx context.Context, queue, id string) (Batch, error) {
	var b Batch
	err := c.call(ctx, "POST", q(queue)+"/batches/"+url.PathEscape(id)+"/close", nil, &b, true)
	return b, err
}

// GetBatch is one batch with its counts (ErrNotFound when there is none).
func (c *Client) GetBatch(ctx context.Context, queue, id string) (Batch, error) {
	var b Batch
	err := c.call(ctx, "GET", q(queue)+"/batches/"+url.PathEscape(id), nil, &b, true)
	return b, err
}

// Batches are the batches of a queue not done yet, oldest first, at most limit.
func (c *Client) Batches(ctx context.Context, queue string, limit int) ([]Batch, error) {
	var out struct {
		Batches []Batch `json:"batches"`
	}
	err := c.call(ctx, "GET", fmt.Sprintf("%s/batches?limit=%d", q(queue), limit), nil, &out, true)
	return out.Batches, err
}
