package delayq

// Batches: jobs enqueued together whose ends — each acked, dead or cancelled — enqueue a
// callback once (POST /v1/queues/{q}/batches and the calls beside it).

import (
	"context"
	"fmt"
	"net/url"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// BatchCallback is a job enqueued once when a batch is done: Payload (a JSON object) gains
// batch: {id, total, succeeded, dead, cancelled}.
type BatchCallback struct {
	Queue   string
	Payload map[string]any
	DelayMs int64
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
	ID          string
	Queue       string
	State       string
	Total       int64
	Pending     int64
	Succeeded   int64
	Dead        int64
	Cancelled   int64
	CreatedAtMs int64
	DoneAtMs    *int64
	// CallbackError is why its callbacks could not be enqueued (state "callback_failed").
	CallbackError *string
	// CallbackAttempts counts their failed tries.
	CallbackAttempts *int64
	// CallbackNextTryAtMs is their next try, ms since the epoch.
	CallbackNextTryAtMs *int64
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
	body := wire.BatchRequest{
		Jobs: bodies, Open: &o.Open, IncludeResults: &o.IncludeResults, ID: o.ID,
		OnComplete: o.OnComplete.wire(), OnSuccess: o.OnSuccess.wire(),
	}
	var out wire.BatchAddedView
	err = c.call(ctx, "POST", q(queue)+"/batches", body, &out, false)
	return batchOf(out.Batch), err
}

// AddToBatch adds jobs to an open batch (ErrConflict once it is closed), closing it after
// them when close is true.
func (c *Client) AddToBatch(ctx context.Context, queue, id string, jobs []BatchJob, close bool) (Batch, error) {
	bodies, err := batchBodies(jobs)
	if err != nil {
		return Batch{}, err
	}
	body := wire.BatchJobsRequest{Jobs: bodies, Close: &close}
	var out wire.BatchAddedView
	err = c.call(ctx, "POST", q(queue)+"/batches/"+url.PathEscape(id)+"/jobs", body, &out, false)
	return batchOf(out.Batch), err
}

// CloseBatch closes a batch: no job joins it any more.
func (c *Client) CloseBatch(ctx context.Context, queue, id string) (Batch, error) {
	var b wire.BatchView
	err := c.call(ctx, "POST", q(queue)+"/batches/"+url.PathEscape(id)+"/close", nil, &b, true)
	return batchOf(b), err
}

// GetBatch is one batch with its counts (ErrNotFound when there is none).
func (c *Client) GetBatch(ctx context.Context, queue, id string) (Batch, error) {
	var b wire.BatchView
	err := c.call(ctx, "GET", q(queue)+"/batches/"+url.PathEscape(id), nil, &b, true)
	return batchOf(b), err
}

// Batches are the batches of a queue not done yet, oldest first, at most limit.
func (c *Client) Batches(ctx context.Context, queue string, limit int) ([]Batch, error) {
	var out wire.BatchList
	err := c.call(ctx, "GET", fmt.Sprintf("%s/batches?limit=%d", q(queue), limit), nil, &out, true)
	res := make([]Batch, len(out.Batches))
	for i, b := range out.Batches {
		res[i] = batchOf(b)
	}
	return res, err
}
