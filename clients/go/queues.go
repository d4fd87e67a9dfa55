package delayq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// Stats are a queue's counts (and, from GetQueue, its settings as the API shows them).
type Stats struct {
	Queue           string          `json:"queue"`
	Scheduled       int64           `json:"scheduled"`
	Due             int64           `json:"due"`
	DueNextMinute   int64           `json:"due_next_minute"`
	Leased          int64           `json:"leased"`
	Dead            int64           `json:"dead"`
	OldestOverdueMs int64           `json:"oldest_overdue_ms"`
	Paused          bool            `json:"paused"`
	WaitingOnLimit  int64           `json:"waiting_on_limit"`
	Done            int64           `json:"done"`
	Settings        json.RawMessage `json:"settings,omitempty"`
}

// Stats is a queue's counts.
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	var s Stats
	err := c.call(ctx, "GET", q(queue), nil, &s, true)
	return s, err
}

// GetQueue is a queue's counts with its settings.
func (c *Client) GetQueue(ctx context.Context, queue string) (Stats, error) {
	return c.Stats(ctx, queue)
}

// PutQueue changes a queue's settings: the fields of patch (the API's names; a nil value
// removes a limit or the target).
func (c *Client) PutQueue(ctx context.Context, queue string, patch map[string]any) (Stats, error) {
	var s Stats
	err := c.call(ctx, "PUT", q(queue), patch, &s, true)
	return s, err
}

// Pause stops leasing from a queue (enqueues are still accepted).
func (c *Client) Pause(ctx context.Context, queue string) error {
	return c.call(ctx, "POST", q(queue)+"/pause", nil, nil, true)
}

// Resume resumes a paused queue.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.call(ctx, "POST", q(queue)+"/resume", nil, nil, true)
}

// KeyHold is one key's hold after PauseKey or ResumeKey.
type KeyHold struct {
	Queue string `json:"queue"`
	Key   string `json:"key"`
	// PausedUntil is when the hold ends (ms since the epoch); nil: not held.
	PausedUntil *int64 `json:"paused_until"`
}

// KeyStats is one key of a queue: its jobs in flight and due, and its hold.
type KeyStats struct {
	Key      string `json:"key"`
	InFlight int64  `json:"in_flight"`
	Due      int64  `json:"due"`
	// PausedUntil is when its hold ends (ms since the epoch); nil: not held.
	PausedUntil *int64 `json:"paused_until"`
}

// PauseKey holds one key's due jobs for d (an upstream's Retry-After): the queue's other keys
// are claimed meanwhile.
func (c *Client) PauseKey(ctx context.Context, queue, key string, d time.Duration) (KeyHold, error) {
	var h KeyHold
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/pause",
		map[string]any{"for_ms": d.Milliseconds()}, &h, true)
	return h, err
}

// PauseKeyUntil holds one key's due jobs until t.
func (c *Client) PauseKeyUntil(ctx context.Context, queue, key string, t time.Time) (KeyHold, error) {
	var h KeyHold
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/pause",
		map[string]any{"until": t.UnixMilli()}, &h, true)
	return h, err
}

// ResumeKey lifts a key's hold: its due jobs are claimed again at once.
func (c *Client) ResumeKey(ctx context.Context, queue, key string) (KeyHold, error) {
	var h KeyHold
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/resume", nil, &h, true)
	return h, err
}

// Keys are the busiest keys of a queue (most jobs in flight and due first, then held ones),
// at most limit.
func (c *Client) Keys(ctx context.Context, queue string, limit int) ([]KeyStats, error) {
	var out struct {
		Keys []KeyStats `json:"keys"`
	}
	err := c.call(ctx, "GET", fmt.Sprintf("%s/keys?limit=%d", q(queue), limit), nil, &out, true)
	return out.Keys, err
}

// ListDead is a page of dead jobs, oldest failure first.
func (c *Client) ListDead(ctx context.Context, queue string, offset, limit int) ([]*Job, error) {
	var out []wireJob
	if err := c.call(ctx, "GET", fmt.Sprintf("%s/dead?offset=%d&limit=%d", q(queue), offset, limit), nil, &out, true); err != nil {
		return nil, err
	}
	res := make([]*Job, len(out))
	for i, w := range out {
		res[i] = w.job()
	}
	return res, nil
}

// RequeueDead puts the dead job id (every dead job when id is "") back, due now; answers how many.
func (c *Client) RequeueDead(ctx context.Context, queue, id string) (int64, error) {
	if id != "" {
		return 1, c.call(ctx, "POST", q(queue)+"/dead/"+url.PathEscape(id)+"/requeue", nil, nil, true)
	}
	var out struct {
		Count int64 `json:"count"`
	}
	err := c.call(ctx, "POST", q(queue)+"/dead/requeue", nil, &out, true)
	return out.Count, err
}

// PurgeDead deletes every dead job; answers how many.
func (c *Client) PurgeDead(ctx context.Context, queue string) (int64, error) {
	var out struct {
		Count int64 `json:"count"`
	}
	err := c.call(ctx, "DELETE", q(queue)+"/dead", nil, &out, true)
	return out.Count, err
}

// ScheduleSpec is a schedule to store: Cron (with TZ) or Every, and each fire's payload.
type ScheduleSpec struct {
	Cron        string
	TZ          string
	Every       time.Duration
	Payload     any
	CatchUp     string
	MaxAttempts int
}

// Schedule is a stored schedule.
type Schedule struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	TZ       string          `json:"tz"`
	EveryMs  int64           `json:"every_ms"`
	CatchUp  string          `json:"catch_up"`
	NextFire int64           `json:"next_fire"`
	Payload  json.RawMessage `json:"payload"`
}

// PutSchedule creates or changes a schedule; answers it with its next fire.
func (c *Client) PutSchedule(ctx context.Context, queue, name string, s ScheduleSpec) (Schedule, error) {
	b := map[string]any{}
	if err := payloadFields(s.Payload, b); err != nil {
		return Schedule{}, err
	}
	if s.Cron != "" {
		b["cron"] = s.Cron
	}
	if s.TZ != "" {
		b["tz"] = s.TZ
	}
	if s.Every != 0 {
		b["every_ms"] = s.Every.Milliseconds()
	}
	if s.CatchUp != "" {
		b["catch_up"] = s.CatchUp
	}
	if s.MaxAttempts != 0 {
		b["max_attempts"] = s.MaxAttempts
	}
	var out Schedule
	err := c.call(ctx, "PUT", q(queue)+"/schedules/"+url.PathEscape(name), b, &out, true)
	return out, err
}

// ListSchedules is a queue's schedules, by name.
func (c *Client) ListSchedules(ctx context.Context, queue string) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	err := c.call(ctx, "GET", q(queue)+"/schedules", nil, &out, true)
	return out.Schedules, err
}

// DeleteSchedule deletes a schedule; false when there was none.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) (bool, error) {
	err := c.call(ctx, "DELETE", q(queue)+"/schedules/"+url.PathEscape(name), nil, nil, true)
	if CodeOf(err) == "not_found" {
		return false, nil
	}
	return err == nil, err
}
