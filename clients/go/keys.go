package delayq

// Every job of one key: a page of them by id, and all of them cancelled or moved in one call
// ("user 42 deleted their account"). Each costs the key's jobs, not the queue's.

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// KeyJobs calls fn with every job of key in queue, by id, page after page: scheduled, due,
// running ("leased") and dead ones, or only those in state when it is not "". fn's error stops
// the walk and is returned.
func (c *Client) KeyJobs(ctx context.Context, queue, key, state string, pageSize int, fn func(*Job) error) error {
	v := url.Values{"limit": {strconv.Itoa(pageSize)}}
	if state != "" {
		v.Set("state", state)
	}
	return c.pages(ctx, q(queue)+"/keys/"+url.PathEscape(key)+"/jobs", v, fn)
}

// KeyCancelled is what CancelKey did: the jobs cancelled, and how many of them were running.
type KeyCancelled struct {
	Cancelled int64
	Running   int64
}

// CancelKey cancels every scheduled and due job of key in queue; with running, its running
// jobs too (each ended at once, its worker's ctx cancelled as by Cancel with CancelRunning).
func (c *Client) CancelKey(ctx context.Context, queue, key string, running bool) (KeyCancelled, error) {
	var out wire.KeyCancelView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/cancel",
		wire.KeyCancelRequest{Running: &running}, &out, true)
	return KeyCancelled{Cancelled: out.Cancelled, Running: out.Running}, err
}

// ShiftKey moves every scheduled and due job of key in queue by d from its own due time
// (negative: earlier, never before now); answers how many moved. Not retried: a repeat would
// move them again.
func (c *Client) ShiftKey(ctx context.Context, queue, key string, d time.Duration) (int64, error) {
	var out wire.KeyRescheduleView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/reschedule",
		wire.KeyRescheduleRequest{ShiftMs: ptr(d.Milliseconds())}, &out, false)
	return out.Rescheduled, err
}

// RescheduleKey moves every scheduled and due job of key in queue to t; answers how many
// moved.
func (c *Client) RescheduleKey(ctx context.Context, queue, key string, t time.Time) (int64, error) {
	var out wire.KeyRescheduleView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/reschedule",
		wire.KeyRescheduleRequest{DueAt: t.UnixMilli()}, &out, true)
	return out.Rescheduled, err
}
