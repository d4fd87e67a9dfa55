package delayq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// Stats are a queue's counts (and, from GetQueue, its settings as the API shows them).
type Stats struct {
	Queue           string
	Scheduled       int64
	Due             int64
	DueNextMinute   int64
	Leased          int64
	Dead            int64
	OldestOverdueMs int64
	Paused          bool
	WaitingOnLimit  int64
	Done            int64
	// Settings are the queue's settings (GetQueue, PutQueue; nil from Stats of the list).
	Settings *QueueSettings
}

// QueueSettings are a queue's settings as the API shows them.
type QueueSettings = wire.SettingsView

// Rate is a start-rate limit: PerS jobs a second, bursts of Burst.
type Rate = wire.RateView

// SettingsPatch is a change of a queue's settings: each field is left out (nil: kept), set
// (Set(v)) or cleared (Clear[T](): a limit or the target removed).
type SettingsPatch = wire.SettingsPatch

// Set is a SettingsPatch field set to v.
func Set[T any](v T) **T {
	p := &v
	return &p
}

// Clear is a SettingsPatch field cleared (the limit or the target removed).
func Clear[T any]() **T {
	var p *T
	return &p
}

// Stats is a queue's counts.
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	var s wire.QueueView
	err := c.call(ctx, "GET", q(queue), nil, &s, true)
	return statsOf(s), err
}

// GetQueue is a queue's counts with its settings.
func (c *Client) GetQueue(ctx context.Context, queue string) (Stats, error) {
	return c.Stats(ctx, queue)
}

// PutQueue changes a queue's settings: the fields patch sets or clears; answers the queue
// with its settings.
func (c *Client) PutQueue(ctx context.Context, queue string, patch SettingsPatch) (Stats, error) {
	var s wire.QueueView
	err := c.call(ctx, "PUT", q(queue), patch, &s, true)
	return statsOf(s), err
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
	Queue string
	Key   string
	// PausedUntil is when the hold ends (ms since the epoch); nil: not held.
	PausedUntil *int64
}

// KeyStats is one key of a queue: its jobs in flight and due, and its hold.
type KeyStats struct {
	Key      string
	InFlight int64
	Due      int64
	// PausedUntil is when its hold ends (ms since the epoch); nil: not held.
	PausedUntil *int64
}

// PauseKey holds one key's due jobs for d (an upstream's Retry-After): the queue's other keys
// are claimed meanwhile.
func (c *Client) PauseKey(ctx context.Context, queue, key string, d time.Duration) (KeyHold, error) {
	var h wire.KeyHoldView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/pause",
		wire.KeyPauseRequest{ForMs: ptr(d.Milliseconds())}, &h, true)
	return keyHoldOf(h), err
}

// PauseKeyUntil holds one key's due jobs until t.
func (c *Client) PauseKeyUntil(ctx context.Context, queue, key string, t time.Time) (KeyHold, error) {
	var h wire.KeyHoldView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/pause",
		wire.KeyPauseRequest{Until: t.UnixMilli()}, &h, true)
	return keyHoldOf(h), err
}

// ResumeKey lifts a key's hold: its due jobs are claimed again at once.
func (c *Client) ResumeKey(ctx context.Context, queue, key string) (KeyHold, error) {
	var h wire.KeyHoldView
	err := c.call(ctx, "POST", q(queue)+"/keys/"+url.PathEscape(key)+"/resume", nil, &h, true)
	return keyHoldOf(h), err
}

// Keys are the busiest keys of a queue (most jobs in flight and due first, then held ones),
// at most limit.
func (c *Client) Keys(ctx context.Context, queue string, limit int) ([]KeyStats, error) {
	var out wire.KeyList
	err := c.call(ctx, "GET", fmt.Sprintf("%s/keys?limit=%d", q(queue), limit), nil, &out, true)
	res := make([]KeyStats, len(out.Keys))
	for i, k := range out.Keys {
		res[i] = keyStatsOf(k)
	}
	return res, err
}

// ListDead is a page of dead jobs, oldest failure first.
func (c *Client) ListDead(ctx context.Context, queue string, offset, limit int) ([]*Job, error) {
	var out []wire.JobView
	if err := c.call(ctx, "GET", fmt.Sprintf("%s/dead?offset=%d&limit=%d", q(queue), offset, limit), nil, &out, true); err != nil {
		return nil, err
	}
	res := make([]*Job, len(out))
	for i, w := range out {
		res[i] = jobFromView(w)
	}
	return res, nil
}

// RequeueDead puts the dead job id (every dead job when id is "") back, due now; answers how many.
func (c *Client) RequeueDead(ctx context.Context, queue, id string) (int64, error) {
	if id != "" {
		return 1, c.call(ctx, "POST", q(queue)+"/dead/"+url.PathEscape(id)+"/requeue", nil, nil, true)
	}
	var out wire.Outcome
	err := c.call(ctx, "POST", q(queue)+"/dead/requeue", nil, &out, true)
	return val(out.Count), err
}

// PurgeDead deletes every dead job; answers how many.
func (c *Client) PurgeDead(ctx context.Context, queue string) (int64, error) {
	var out wire.Outcome
	err := c.call(ctx, "DELETE", q(queue)+"/dead", nil, &out, true)
	return val(out.Count), err
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
	Name     string
	Cron     string
	TZ       string
	EveryMs  int64
	CatchUp  string
	NextFire int64
	Payload  json.RawMessage
}

// PutSchedule creates or changes a schedule; answers it with its next fire.
func (c *Client) PutSchedule(ctx context.Context, queue, name string, s ScheduleSpec) (Schedule, error) {
	var b wire.ScheduleBody
	var err error
	if b.Payload, b.PayloadB64, err = payloadFields(s.Payload); err != nil {
		return Schedule{}, err
	}
	b.Cron, b.Tz, b.CatchUp, b.MaxAttempts = nonZero(s.Cron), nonZero(s.TZ), nonZero(s.CatchUp), nonZero(s.MaxAttempts)
	if s.Every != 0 {
		b.EveryMs = ptr(s.Every.Milliseconds())
	}
	var out wire.ScheduleView
	err = c.call(ctx, "PUT", q(queue)+"/schedules/"+url.PathEscape(name), b, &out, true)
	return scheduleOf(out), err
}

// ListSchedules is a queue's schedules, by name.
func (c *Client) ListSchedules(ctx context.Context, queue string) ([]Schedule, error) {
	var out wire.ScheduleList
	err := c.call(ctx, "GET", q(queue)+"/schedules", nil, &out, true)
	res := make([]Schedule, len(out.Schedules))
	for i, s := range out.Schedules {
		res[i] = scheduleOf(s)
	}
	return res, err
}

// DeleteSchedule deletes a schedule; false when there was none.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) (bool, error) {
	err := c.call(ctx, "DELETE", q(queue)+"/schedules/"+url.PathEscape(name), nil, nil, true)
	if CodeOf(err) == "not_found" {
		return false, nil
	}
	return err == nil, err
}
