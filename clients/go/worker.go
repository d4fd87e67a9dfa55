package delayq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// HandlerFunc handles one job: nil acks it, an error fails the attempt (retried by the queue's
// backoff; RetryIn or DeadLetter choose otherwise). ctx ends at the job's timeout, and when the
// job is cancelled while it runs (Cancel with CancelRunning: the handler should return; the
// job is neither acked nor retried).
type HandlerFunc func(ctx context.Context, job *Job) error

// RetryError retries the job after Delay instead of the queue's backoff.
type RetryError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// RetryIn is the error a handler returns to retry the job after d.
func RetryIn(d time.Duration, err error) error { return &RetryError{Delay: d, Err: err} }

// DeadLetterError dead-letters the job at once.
type DeadLetterError struct{ Reason string }

func (e *DeadLetterError) Error() string { return e.Reason }

// DeadLetter is the error a handler returns to dead-letter the job at once.
func DeadLetter(reason string) error { return &DeadLetterError{Reason: reason} }

// WorkerOption configures a Worker.
type WorkerOption func(*Worker)

// WithConcurrency runs n jobs at once (default 4).
func WithConcurrency(n int) WorkerOption { return func(w *Worker) { w.concurrency = n } }

// WithLease leases each job for d (default 30 s), extended every third of it while its
// handler runs.
func WithLease(d time.Duration) WorkerOption { return func(w *Worker) { w.lease = d } }

// WithWait makes each claim wait up to d for a due job (default 5 s).
func WithWait(d time.Duration) WorkerOption { return func(w *Worker) { w.wait = d } }

// WithStrict makes a worker of several queues serve them in the order given (a queue only
// while every one before it has nothing due) instead of by weight.
func WithStrict() WorkerOption { return func(w *Worker) { w.strict = true } }

// WithCancelGrace sets how long a handler whose job was cancelled while it ran (its ctx
// cancelled) may take to return before its slot goes to another job (default 10 s).
func WithCancelGrace(d time.Duration) WorkerOption { return func(w *Worker) { w.cancelGrace = d } }

// cancelCheck is how often a worker that runs jobs asks which of them were cancelled.
const cancelCheck = 500 * time.Millisecond

// runningJob is a job a handler runs: its lease, and how to cancel its handler's ctx.
type runningJob struct {
	lease     LeaseOf
	cancel    context.CancelFunc
	cancelled atomic.Bool
}

// WithErrorLog is told of the errors the worker handles itself (a failed claim, a lost lease).
func WithErrorLog(f func(error)) WorkerOption { return func(w *Worker) { w.logf = f } }

// Worker runs a handler for the jobs of one queue, or of several (NewQueuesWorker).
type Worker struct {
	c           *Client
	queue       string
	queues      []QueueWeight
	strict      bool
	h           HandlerFunc
	concurrency int
	lease       time.Duration
	wait        time.Duration
	logf        func(error)
	cancelGrace time.Duration

	mu sync.Mutex
	// jobs are the running jobs, by queue and id.
	jobs map[string]*runningJob
	acks []QueueAck
	// polling: a claim is waiting on the server, so acks do not wait for the next one (a job
	// whose lease ran out meanwhile would be handed out again).
	polling bool
	// pollSince is when the claim in flight was sent.
	pollSince time.Time
	// flushing counts the ack batches flushSoon has in flight.
	flushing sync.WaitGroup
}

// NewWorker is a worker of queue.
func NewWorker(c *Client, queue string, h HandlerFunc, opts ...WorkerOption) *Worker {
	return NewQueuesWorker(c, []QueueWeight{{Name: queue}}, h, opts...)
}

// NewQueuesWorker is a worker of several queues: among those with due jobs it claims by
// weight (or, WithStrict, in the order given), with one long poll over all of them
// (POST /v1/claim). A job's Queue says which.
func NewQueuesWorker(c *Client, queues []QueueWeight, h HandlerFunc, opts ...WorkerOption) *Worker {
	first := ""
	if len(queues) > 0 {
		first = queues[0].Name
	}
	w := &Worker{c: c, queue: first, queues: queues, h: h, concurrency: 4, lease: 30 * time.Second, wait: 5 * time.Second, logf: func(error) {}, cancelGrace: 10 * time.Second, jobs: map[string]*runningJob{}}
	for _, o := range opts {
		o(w)
	}
	if w.concurrency < 1 {
		w.concurrency = 1
	}
	return w
}

func (w *Worker) takeAcks() []QueueAck {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.acks)
	if n > 1000 {
		n = 1000
	}
	out := append([]QueueAck(nil), w.acks[:n]...)
	w.acks = w.acks[n:]
	return out
}

// ackEach acknowledges each finished job in its own queue (one request per queue).
func (w *Worker) ackEach(ctx context.Context, acks []QueueAck) error {
	var order []string
	by := map[string][]Ack{}
	for _, a := range acks {
		if _, ok := by[a.Queue]; !ok {
			order = append(order, a.Queue)
		}
		by[a.Queue] = append(by[a.Queue], Ack{ID: a.ID, LeaseToken: a.LeaseToken, Result: a.Result, ResultB64: a.ResultB64})
	}
	for _, q := range order {
		if _, err := w.c.AckBatch(ctx, q, by[q]); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) putAcks(a []QueueAck) {
	w.mu.Lock()
	w.acks = append(a, w.acks...)
	w.mu.Unlock()
}

// Run claims and runs jobs until ctx is cancelled; it returns once the claim in flight is cut
// short, the running handlers have finished and their acks are sent.
func (w *Worker) Run(ctx context.Context) error {
	slots := make(chan struct{}, w.concurrency)
	done := make(chan struct{}, w.concurrency)
	var running sync.WaitGroup
	watchDone := make(chan struct{})
	defer close(watchDone)
	go w.watchCancels(watchDone)
	failures := 0
	for ctx.Err() == nil {
		free := w.concurrency - len(slots)
		if free == 0 {
			select {
			case <-done:
			case <-ctx.Done():
			}
			continue
		}
		acks := w.takeAcks()
		poll := newID()
		// The claim is not tied to ctx: a cancelled ctx cuts it short on the server instead,
		// so the jobs it was handed come back in its answer and are given back.
		stop := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				// (A claim over several queues is cut through the first of them.)
				cut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = w.c.CutPoll(cut, w.queue, poll)
				cancel()
			case <-stop:
			}
		}()
		wait := w.wait
		if len(slots) > 0 && wait > time.Second {
			wait = time.Second
		}
		claimCtx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
		w.setPolling(true)
		// Acks of jobs that finish while this claim waits on the server go on their own.
		slow := time.AfterFunc(slowClaim, w.flushSoon)
		var got Claimed
		var err error
		if len(w.queues) == 1 {
			plain := make([]Ack, len(acks))
			for i, a := range acks {
				plain[i] = Ack{ID: a.ID, LeaseToken: a.LeaseToken, Result: a.Result, ResultB64: a.ResultB64}
			}
			got, err = w.c.Claim(claimCtx, w.queue, ClaimOptions{Max: free, Lease: w.lease, Wait: wait, Acks: plain, PollID: poll})
		} else {
			got, err = w.c.ClaimMany(claimCtx, w.queues, ClaimManyOptions{Max: free, Lease: w.lease, Wait: wait, Strict: w.strict, Acks: acks, PollID: poll})
		}
		slow.Stop()
		w.setPolling(false)
		cancel()
		close(stop)
		if err != nil {
			w.putAcks(acks)
			w.logf(err)
			failures++
			backoff := time.Duration(100<<minInt(failures, 6)) * time.Millisecond
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		failures = 0
		if ctx.Err() != nil {
			w.giveBack(got.Jobs)
			break
		}
		for _, j := range got.Jobs {
			slots <- struct{}{}
			running.Add(1)
			go func(j *Job) {
				defer func() {
					<-slots
					// A wake-up for a loop waiting on a free slot; never blocks.
					select {
					case done <- struct{}{}:
					default:
					}
					running.Done()
				}()
				w.runOne(j)
			}(j)
		}
	}
	running.Wait()
	w.flushing.Wait()
	flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		a := w.takeAcks()
		if len(a) == 0 {
			return nil
		}
		if err := w.ackEach(flush, a); err != nil {
			w.logf(err)
			return nil
		}
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func (w *Worker) giveBack(jobs []*Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, j := range jobs {
		if err := w.c.Release(ctx, j.Queue, j.ID, j.LeaseToken); err != nil {
			w.logf(err)
		}
	}
}

// watchCancels asks every cancelCheck which running jobs were cancelled (Cancel with
// CancelRunning) and cancels their handlers' ctx, until done closes.
func (w *Worker) watchCancels(done <-chan struct{}) {
	tick := time.NewTicker(cancelCheck)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		asked := make([]LeaseOf, 0, len(w.jobs))
		for _, r := range w.jobs {
			if !r.cancelled.Load() && len(asked) < 1000 {
				asked = append(asked, r.lease)
			}
		}
		w.mu.Unlock()
		if len(asked) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		found, err := w.c.CancelledLeases(ctx, asked)
		cancel()
		if err != nil {
			continue
		}
		for _, l := range found {
			w.cancelJob(l.Queue, l.ID)
		}
	}
}

// cancelJob cancels the handler's ctx of a job cancelled while it runs.
func (w *Worker) cancelJob(queue, id string) {
	w.mu.Lock()
	r := w.jobs[queue+"\x00"+id]
	w.mu.Unlock()
	if r != nil && !r.cancelled.Swap(true) {
		r.cancel()
	}
}

func (w *Worker) runOne(j *Job) {
	ctx, cancel := context.WithCancel(context.Background())
	if j.Timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), j.Timeout)
	}
	defer cancel()
	key := j.Queue + "\x00" + j.ID
	r := &runningJob{lease: LeaseOf{Queue: j.Queue, ID: j.ID, LeaseToken: j.LeaseToken}, cancel: cancel}
	w.mu.Lock()
	w.jobs[key] = r
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.jobs, key)
		w.mu.Unlock()
	}()
	every := w.lease / 3
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	result := make(chan error, 1)
	go func() { result <- w.h(ctx, j) }()
	for {
		select {
		case err := <-result:
			if r.cancelled.Load() {
				return
			}
			w.finish(j, err)
			return
		case <-ctx.Done():
			if r.cancelled.Load() {
				// Cancelled while it ran: its store ended it already (nothing to ack or
				// nack); the handler gets its grace to return.
				select {
				case <-result:
				case <-time.After(w.cancelGrace):
				}
				return
			}
			// Over its timeout: given up, as the API says (the handler is left to notice ctx).
			w.nack(j, NackOptions{Error: "timeout"})
			return
		case <-tick.C:
			ext, c := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := w.c.Extend(ext, j.Queue, j.ID, j.LeaseToken, w.lease); CodeOf(err) == "cancelled" {
				w.cancelJob(j.Queue, j.ID)
			} else if err != nil {
				w.logf(err)
			}
			c()
		}
	}
}

func (w *Worker) setPolling(on bool) {
	w.mu.Lock()
	w.polling = on
	w.pollSince = time.Now()
	w.mu.Unlock()
}

// slowClaim: a claim in flight longer than this is waiting on the server (a claim that finds
// jobs answers in a few ms): finished jobs' acks then go on their own.
const slowClaim = 20 * time.Millisecond

// flushSoon sends the pending acks now when a claim is waiting (they would otherwise wait for
// the next claim, past the leases of their jobs).
func (w *Worker) flushSoon() {
	w.mu.Lock()
	if !w.polling || len(w.acks) == 0 || time.Since(w.pollSince) < slowClaim {
		w.mu.Unlock()
		return
	}
	w.flushing.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.flushing.Done()
		acks := w.takeAcks()
		if len(acks) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.ackEach(ctx, acks); err != nil {
			w.putAcks(acks)
			w.logf(err)
		}
	}()
}

func (w *Worker) finish(j *Job, err error) {
	if err == nil && j.resultSize() > MaxResultBytes {
		// The work is done: running it again is the operator's call (the server would refuse
		// the ack, and the acks riding with it).
		msg := fmt.Sprintf("result of %d bytes is over the limit of %d bytes", j.resultSize(), MaxResultBytes)
		w.nack(j, NackOptions{Error: msg, Dead: true})
		return
	}
	if err == nil {
		w.mu.Lock()
		w.acks = append(w.acks, j.ack())
		w.mu.Unlock()
		w.flushSoon()
		return
	}
	var retry *RetryError
	var dead *DeadLetterError
	switch {
	case errors.As(err, &retry):
		d := retry.Delay
		w.nack(j, NackOptions{Error: err.Error(), RetryIn: &d})
	case errors.As(err, &dead):
		w.nack(j, NackOptions{Error: dead.Reason, Dead: true})
	default:
		w.nack(j, NackOptions{Error: err.Error()})
	}
}

func (w *Worker) nack(j *Job, o NackOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.c.Nack(ctx, j.Queue, j.ID, j.LeaseToken, o); err != nil {
		w.logf(err)
	}
}
