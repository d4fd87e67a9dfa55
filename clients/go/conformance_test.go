package delayq

// The shared conformance suite (clients/conformance) run by the Go client: every scenario
// against the live server at DELAYQ_URL, and every webhook vector.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// load reads a file of the shared suite: clients/conformance beside this module, or
// DELAYQ_CONFORMANCE (the module installed from a release, away from the repository).
func load(t *testing.T, name string, into any) {
	dir := os.Getenv("DELAYQ_CONFORMANCE")
	if dir == "" {
		dir = "../conformance"
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

// matches is the suite's deep subset match.
func matches(expect, got any) bool {
	switch e := expect.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range e {
			gv, ok := g[k]
			if !ok && v == nil {
				continue // an expected null: Go leaves a nil field out (omitempty)
			}
			if !ok || !matches(v, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(e) {
			return false
		}
		for i := range e {
			if !matches(e[i], g[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(expect, got)
}

// norm turns a result into the JSON shape the suite compares (numbers as float64).
func norm(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

type runner struct {
	c      *Client
	q      string
	leases map[string]int64
}

func num(a map[string]any, k string) (float64, bool) {
	v, ok := a[k].(float64)
	return v, ok
}

func (r *runner) token(a map[string]any) int64 {
	if t, ok := num(a, "lease_token"); ok {
		return int64(t)
	}
	t := r.leases[a["id"].(string)]
	if a["lease"] == "stale" {
		return t + 1_000_000
	}
	return t
}

func enqueueOpts(a map[string]any) []EnqueueOption {
	var o []EnqueueOption
	if id, ok := a["id"].(string); ok {
		o = append(o, WithID(id))
	}
	if d, ok := num(a, "delay_ms"); ok {
		o = append(o, WithField("delay_ms", d))
	}
	if v, ok := a["run_at"]; ok {
		o = append(o, WithField("run_at", v))
	}
	if n, ok := num(a, "max_attempts"); ok {
		o = append(o, WithMaxAttempts(int(n)))
	}
	if n, ok := num(a, "priority"); ok {
		o = append(o, WithPriority(int(n)))
	}
	if k, ok := a["key"].(string); ok {
		o = append(o, WithKey(k))
	}
	if a["on_conflict"] == "replace" {
		o = append(o, WithReplace())
	}
	if t, ok := a["target"]; ok {
		o = append(o, WithField("target", t))
	}
	if ds, ok := a["depends_on"].([]any); ok {
		var refs []DepRef
		for _, d := range ds {
			switch v := d.(type) {
			case string:
				refs = append(refs, DepRef{ID: v})
			case map[string]any:
				refs = append(refs, DepRef{Queue: v["queue"].(string), ID: v["id"].(string)})
			}
		}
		o = append(o, WithDependsOn(refs...))
	}
	if p, ok := a["on_dependency_failure"].(string); ok {
		o = append(o, WithOnDependencyFailure(p))
	}
	if r, ok := a["include_dependency_results"].(bool); ok && r {
		o = append(o, WithDependencyResults())
	}
	return o
}

func listed(ids []string) map[string]any {
	sort.Strings(ids)
	if ids == nil {
		ids = []string{}
	}
	return map[string]any{"count": len(ids), "ids": ids}
}

func (r *runner) step(ctx context.Context, op string, a map[string]any) (any, error) {
	c, q := r.c, r.q
	id, _ := a["id"].(string)
	switch op {
	case "enqueue":
		e, err := c.Enqueue(ctx, q, a["payload"], enqueueOpts(a)...)
		return map[string]any{"id": e.ID, "created": e.Created}, err
	case "enqueue_batch":
		var jobs []BatchJob
		for _, j := range a["jobs"].([]any) {
			m := j.(map[string]any)
			jobs = append(jobs, BatchJob{Payload: m["payload"], Options: enqueueOpts(m)})
		}
		out, err := c.EnqueueBatch(ctx, q, jobs)
		res := []any{}
		for _, e := range out {
			res = append(res, map[string]any{"id": e.ID, "created": e.Created})
		}
		return res, err
	case "get":
		j, err := c.Get(ctx, q, id)
		if errors.Is(err, ErrNotFound) {
			// Every failure is a *Error: a missing job says its code as well.
			if CodeOf(err) != "not_found" {
				return nil, fmt.Errorf("a missing job's error has the code %q", CodeOf(err))
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var payload any
		_ = json.Unmarshal(j.Payload, &payload)
		m := map[string]any{"id": j.ID, "state": j.State, "attempt": j.Attempt, "max_attempts": j.MaxAttempts, "payload": payload}
		if j.LastError != "" {
			m["last_error"] = j.LastError
		}
		m["result"] = nil
		if j.Result != nil {
			var result any
			_ = json.Unmarshal(j.Result, &result)
			m["result"] = result
		}
		if j.Key != "" {
			m["key"] = j.Key
		}
		return m, nil
	case "cancel":
		var opts []CancelOption
		if a["running"] == true {
			opts = append(opts, CancelRunning())
		}
		res, err := c.Cancel(ctx, q, id, opts...)
		return string(res), err
	case "reschedule":
		due := WithField("delay_ms", a["delay_ms"])
		if _, ok := a["delay_ms"]; !ok {
			due = WithField("run_at", a["run_at"])
		}
		_, err := c.Reschedule(ctx, q, id, due)
		return nil, err
	case "claim":
		o := ClaimOptions{Max: 1}
		if n, ok := num(a, "max"); ok {
			o.Max = int(n)
		}
		if n, ok := num(a, "lease_ms"); ok {
			o.Lease = time.Duration(n) * time.Millisecond
		}
		got, err := c.Claim(ctx, q, o)
		ids := []string{}
		keyOf := map[string]any{}
		for _, j := range got.Jobs {
			r.leases[j.ID] = j.LeaseToken
			ids = append(ids, j.ID)
			keyOf[j.ID] = nil
			if j.Key != "" {
				keyOf[j.ID] = j.Key
			}
		}
		out := listed(ids)
		keys := []any{}
		for _, id := range out["ids"].([]string) {
			keys = append(keys, keyOf[id])
		}
		out["keys"] = keys
		return out, err
	case "ack":
		result, ok := a["result"]
		if !ok {
			return "acked", c.Ack(ctx, q, id, r.token(a))
		}
		if n, ok := num(a, "result_repeat"); ok {
			result = strings.Repeat(result.(string), int(n))
		}
		return "acked", c.AckWithResult(ctx, q, id, r.token(a), result)
	case "nack":
		o := NackOptions{}
		o.Error, _ = a["error"].(string)
		o.Dead, _ = a["dead"].(bool)
		if n, ok := num(a, "retry_in_ms"); ok {
			d := time.Duration(n) * time.Millisecond
			o.RetryIn = &d
		}
		return c.Nack(ctx, q, id, r.token(a), o)
	case "extend":
		ms := 30000.0
		if n, ok := num(a, "lease_ms"); ok {
			ms = n
		}
		_, err := c.Extend(ctx, q, id, r.token(a), time.Duration(ms)*time.Millisecond)
		return "extended", err
	case "release":
		return nil, c.Release(ctx, q, id, r.token(a))
	case "list":
		size, _ := num(a, "page_size")
		var ids []string
		err := c.ListJobs(ctx, q, a["state"].(string), int(size), func(j *Job) error {
			ids = append(ids, j.ID)
			return nil
		})
		return listed(ids), err
	case "list_dead":
		jobs, err := c.ListDead(ctx, q, 0, 100)
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		return listed(ids), err
	case "requeue_dead":
		return c.RequeueDead(ctx, q, id)
	case "purge_dead":
		return c.PurgeDead(ctx, q)
	case "put_schedule":
		s := ScheduleSpec{Payload: a["payload"]}
		s.Cron, _ = a["cron"].(string)
		s.TZ, _ = a["tz"].(string)
		if n, ok := num(a, "every_ms"); ok {
			s.Every = time.Duration(n) * time.Millisecond
		}
		out, err := c.PutSchedule(ctx, q, a["name"].(string), s)
		return map[string]any{"name": out.Name}, err
	case "list_schedules":
		out, err := c.ListSchedules(ctx, q)
		names := []string{}
		for _, s := range out {
			names = append(names, s.Name)
		}
		sort.Strings(names)
		return names, err
	case "delete_schedule":
		return c.DeleteSchedule(ctx, q, a["name"].(string))
	case "stats":
		s, err := c.Stats(ctx, q)
		return map[string]any{"scheduled": s.Scheduled, "due": s.Due, "leased": s.Leased, "dead": s.Dead, "paused": s.Paused}, err
	case "get_queue":
		s, err := c.GetQueue(ctx, q)
		return map[string]any{"paused": s.Paused, "settings": s.Settings}, err
	case "put_queue":
		patch, err := patchOf(a["settings"].(map[string]any))
		if err != nil {
			return nil, err
		}
		_, err = c.PutQueue(ctx, q, patch)
		return nil, err
	case "pause":
		return nil, c.Pause(ctx, q)
	case "resume":
		return nil, c.Resume(ctx, q)
	case "pause_key":
		ms, _ := num(a, "for_ms")
		var h KeyHold
		var err error
		if _, ok := a["for_ms"]; ok {
			h, err = c.PauseKey(ctx, q, a["key"].(string), time.Duration(ms)*time.Millisecond)
		} else {
			// Neither field: the server's own answer (invalid_delay) is what the step expects.
			err = c.call(ctx, "POST", "/v1/queues/"+q+"/keys/"+a["key"].(string)+"/pause", map[string]any{}, &h, true)
		}
		return map[string]any{"key": h.Key, "paused": h.PausedUntil != nil}, err
	case "resume_key":
		h, err := c.ResumeKey(ctx, q, a["key"].(string))
		return map[string]any{"key": h.Key, "paused": h.PausedUntil != nil}, err
	case "create_batch", "add_to_batch", "close_batch", "batch":
		return batchStep(ctx, c, q, op, a)
	case "create_flow":
		var jobs []FlowJob
		for _, x := range a["jobs"].([]any) {
			j := x.(map[string]any)
			queue, _ := j["queue"].(string)
			if queue == "" {
				queue = q
			}
			payload, ok := j["payload"]
			if !ok {
				payload = map[string]any{}
			}
			jobs = append(jobs, FlowJob{Queue: queue, Payload: payload, Options: enqueueOpts(j)})
		}
		out, err := c.CreateFlow(ctx, jobs)
		res := []any{}
		for _, e := range out {
			res = append(res, map[string]any{"id": e.ID, "created": e.Created})
		}
		return res, err
	case "key_jobs":
		size := 100
		if n, ok := num(a, "page_size"); ok {
			size = int(n)
		}
		state, _ := a["state"].(string)
		ids, states := []string{}, []string{}
		err := c.KeyJobs(ctx, q, a["key"].(string), state, size, func(j *Job) error {
			ids = append(ids, j.ID)
			states = append(states, j.State)
			return nil
		})
		return map[string]any{"count": len(ids), "ids": ids, "states": states}, err
	case "cancel_key":
		running, _ := a["running"].(bool)
		k, err := c.CancelKey(ctx, q, a["key"].(string), running)
		return map[string]any{"cancelled": k.Cancelled, "running": k.Running}, err
	case "reschedule_key":
		if n, ok := num(a, "shift_ms"); ok {
			return c.ShiftKey(ctx, q, a["key"].(string), time.Duration(n)*time.Millisecond)
		}
		n, _ := num(a, "due_at")
		return c.RescheduleKey(ctx, q, a["key"].(string), time.UnixMilli(int64(n)))
	case "keys":
		ks, err := c.Keys(ctx, q, 20)
		out := []any{}
		for _, k := range ks {
			out = append(out, map[string]any{"key": k.Key, "in_flight": k.InFlight, "due": k.Due, "paused": k.PausedUntil != nil})
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown operation %s", op)
}

func TestConformanceScenarios(t *testing.T) {
	url := os.Getenv("DELAYQ_URL")
	if url == "" {
		t.Skip("DELAYQ_URL is not set (run through cargo test)")
	}
	var suite struct {
		Scenarios []struct {
			Name  string
			Steps []map[string]any
		}
	}
	load(t, "scenarios.json", &suite)
	c := NewClient(url)
	for _, sc := range suite.Scenarios {
		sc := sc
		t.Run(sc.Name, func(t *testing.T) {
			ctx := context.Background()
			r := &runner{c: c, q: "conf-" + newID()[:10], leases: map[string]int64{}}
			for i, st := range sc.Steps {
				op := st["do"].(string)
				args, _ := st["args"].(map[string]any)
				if args == nil {
					args = map[string]any{}
				}
				where := fmt.Sprintf("step %d (%s)", i+1, op)
				got, err := r.step(ctx, op, args)
				if want, ok := st["error"]; ok {
					if CodeOf(err) != want {
						t.Fatalf("%s: expected error %v, got %v (%v)", where, want, err, norm(got))
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if want, ok := st["expect"]; ok && !matches(want, norm(got)) {
					t.Fatalf("%s: expected %v, got %v", where, want, norm(got))
				}
			}
		})
	}
}

func TestWebhookVectors(t *testing.T) {
	var suite struct {
		Vectors []struct {
			Name    string
			Secrets []string
			Headers map[string]string
			Body    string
			Now     int64
			Valid   bool
		}
	}
	load(t, "webhooks.json", &suite)
	for _, v := range suite.Vectors {
		h := http.Header{}
		for k, x := range v.Headers {
			h.Set(k, x)
		}
		msg, err := VerifyWebhookAt(v.Secrets, h, []byte(v.Body), time.Unix(v.Now, 0))
		if (err == nil) != v.Valid {
			t.Errorf("%s: valid=%v, got %v", v.Name, v.Valid, err)
		}
		if err == nil {
			ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
			if msg.ID != h.Get("webhook-id") || msg.Timestamp.Unix() != ts || string(msg.Payload) != v.Body {
				t.Errorf("%s: the verified message is %+v", v.Name, msg)
			}
		}
		if err != nil && CodeOf(err) != "invalid_signature" {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
}

// batchStep runs a batch operation of a scenario (callbacks go to the scenario's queue).
func batchStep(ctx context.Context, c *Client, q, op string, a map[string]any) (any, error) {
	view := func(b Batch, err error) (any, error) {
		return map[string]any{"id": b.ID, "state": b.State, "total": b.Total, "pending": b.Pending,
			"succeeded": b.Succeeded, "dead": b.Dead, "cancelled": b.Cancelled}, err
	}
	var jobs []BatchJob
	if js, ok := a["jobs"].([]any); ok {
		for _, j := range js {
			m := j.(map[string]any)
			jobs = append(jobs, BatchJob{Payload: m["payload"], Options: enqueueOpts(m)})
		}
	}
	id, _ := a["id"].(string)
	switch op {
	case "create_batch":
		cb := func(v any) *BatchCallback {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			p, _ := m["payload"].(map[string]any)
			return &BatchCallback{Queue: q, Payload: p}
		}
		o := BatchOptions{OnComplete: cb(a["on_complete"]), OnSuccess: cb(a["on_success"])}
		if _, ok := a["id"]; ok {
			o.ID = &id
		}
		o.Open, _ = a["open"].(bool)
		o.IncludeResults, _ = a["include_results"].(bool)
		return view(c.CreateBatch(ctx, q, jobs, o))
	case "add_to_batch":
		closeIt, _ := a["close"].(bool)
		return view(c.AddToBatch(ctx, q, id, jobs, closeIt))
	case "close_batch":
		return view(c.CloseBatch(ctx, q, id))
	}
	wait, _ := a["wait"].(bool)
	until := time.Now().Add(10 * time.Second)
	for {
		b, err := c.GetBatch(ctx, q, id)
		if err != nil || !wait || b.State == "done" || time.Now().After(until) {
			return view(b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// patchOf is a scenario's settings as a SettingsPatch: a field set to null is cleared.
func patchOf(settings map[string]any) (SettingsPatch, error) {
	var p SettingsPatch
	v := reflect.ValueOf(&p).Elem()
	for name, value := range settings {
		found := false
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if strings.Split(f.Tag.Get("json"), ",")[0] != name {
				continue
			}
			found = true
			inner := reflect.New(f.Type.Elem()) // a *T holding nil: cleared
			if value != nil {
				val := reflect.New(f.Type.Elem().Elem())
				raw, _ := json.Marshal(value)
				if err := json.Unmarshal(raw, val.Interface()); err != nil {
					return p, fmt.Errorf("setting %s: %w", name, err)
				}
				inner.Elem().Set(val)
			}
			v.Field(i).Set(inner)
		}
		if !found {
			return p, fmt.Errorf("no setting %s in SettingsPatch", name)
		}
	}
	return p, nil
}
