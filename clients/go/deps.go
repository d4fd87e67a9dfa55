package delayq

// Jobs that wait for other jobs: an enqueue's WithDependsOn, a job's Dependencies, and
// CreateFlow — jobs of any queues that wait for one another, enqueued in one call.

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// DepRef names a job another job waits for: ID in Queue ("": the same queue).
type DepRef struct {
	Queue string
	ID    string
}

// Dependency is one dependency of a job: how it stands ("pending", "done", "dead",
// "cancelled") and, in the claim of a job enqueued WithDependencyResults, its result.
type Dependency struct {
	Queue, ID, State string
	// Result is its result as JSON (nil: none, or not JSON: see ResultBytes).
	Result      json.RawMessage
	ResultBytes []byte
}

// WithDependsOn makes the job wait for these jobs: until each has ended its state is
// "waiting"; then it is due at the later of its own due time and that end.
func WithDependsOn(deps ...DepRef) EnqueueOption {
	return func(b *enqueueBody) {
		for _, d := range deps {
			var v any = d.ID
			if d.Queue != "" {
				v = map[string]string{"queue": d.Queue, "id": d.ID}
			}
			raw, err := json.Marshal(v)
			if err != nil && b.err == nil {
				b.err = err
			}
			b.DependsOn = append(b.DependsOn, raw)
		}
	}
}

// WithOnDependencyFailure says what a dead or cancelled dependency does to the job: "dead"
// (the default: dead-lettered, its last error naming the dependency), "cancel" or "run".
func WithOnDependencyFailure(policy string) EnqueueOption {
	return func(b *enqueueBody) { b.OnDependencyFailure = ptr(wire.OnDependencyFailure(policy)) }
}

// WithDependencyResults puts the dependencies and their results in the job's claim
// (Job.Dependencies).
func WithDependencyResults() EnqueueOption {
	return func(b *enqueueBody) { b.IncludeDependencyResults = ptr(true) }
}

// dependenciesOf is an answer's dependencies.
func dependenciesOf(ds []wire.DepView) []Dependency {
	var out []Dependency
	for _, d := range ds {
		x := Dependency{Queue: d.Queue, ID: d.ID, State: string(d.State)}
		if len(d.Result) > 0 && string(d.Result) != "null" {
			x.Result = d.Result
		}
		if d.ResultB64 != nil {
			x.ResultBytes, _ = base64.StdEncoding.DecodeString(*d.ResultB64)
		}
		out = append(out, x)
	}
	return out
}

// FlowJob is one job of CreateFlow: its queue, payload and options (WithID is required).
type FlowJob struct {
	Queue   string
	Payload any
	Options []EnqueueOption
}

// FlowEnqueued is what CreateFlow did with one job.
type FlowEnqueued struct {
	Queue string
	Enqueued
}

// CreateFlow enqueues jobs of any queues that wait for one another (WithDependsOn), checked
// whole — a cycle, a dependency neither in the flow nor stored, or a bad job refuses it all
// (code "invalid_flow"), nothing written — then written dependencies first. Each job needs
// its id, so a repeated flow stores nothing twice. One answer per job, in order.
func (c *Client) CreateFlow(ctx context.Context, jobs []FlowJob) ([]FlowEnqueued, error) {
	bodies := make([]map[string]any, 0, len(jobs))
	for _, j := range jobs {
		b, err := jobBody(j.Payload, j.Options)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		m["queue"] = j.Queue
		bodies = append(bodies, m)
	}
	var out wire.FlowResponse
	if err := c.call(ctx, "POST", "/v1/flows", map[string]any{"jobs": bodies}, &out, true); err != nil {
		return nil, err
	}
	res := make([]FlowEnqueued, len(out.Jobs))
	for i, j := range out.Jobs {
		res[i] = FlowEnqueued{Queue: j.Queue, Enqueued: enqueuedOf(j.EnqueueResponse)}
	}
	return res, nil
}
