package delayq

// The Worker under faults, against live servers: a server restarted mid-run (this test starts
// its own with DELAYQ_BIN), a worker stopped mid-job, a handler that runs past its lease, and
// a job past its timeout.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func liveURL(t *testing.T) string {
	u := os.Getenv("DELAYQ_URL")
	if u == "" {
		t.Skip("DELAYQ_URL is not set (run through cargo test)")
	}
	return u
}

func until(t *testing.T, what string, pred func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		if pred() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// serve starts delayq serve on the embedded store in dir; the process and its address.
func serve(t *testing.T, dir, listen string) (*exec.Cmd, string) {
	bin := os.Getenv("DELAYQ_BIN")
	if bin == "" {
		t.Skip("DELAYQ_BIN is not set (run through cargo test)")
	}
	cmd := exec.Command(bin, "--data", dir, "serve", "--listen", listen)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("delayq serve: %v", err)
	}
	m := regexp.MustCompile(`http://([0-9.]+:\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %q", line)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	return cmd, m[1]
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

type seenSet struct {
	mu  sync.Mutex
	ids map[string]int
}

func (s *seenSet) add(id string) {
	s.mu.Lock()
	s.ids[id]++
	s.mu.Unlock()
}

func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func TestWorkerCarriesOnAcrossAServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv, addr := serve(t, dir, "127.0.0.1:0")
	c := NewClient("http://"+addr, WithRetries(0))
	ctx := context.Background()
	q := "w-" + newID()[:10]
	for n := 0; n < 20; n++ {
		if _, err := c.Enqueue(ctx, q, n, WithID(fmt.Sprintf("now-%d", n))); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, q, n, WithID(fmt.Sprintf("later-%d", n)), WithDelay(1500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	seen := &seenSet{ids: map[string]int{}}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	w := NewWorker(c, q, func(ctx context.Context, j *Job) error { seen.add(j.ID); return nil },
		WithConcurrency(4), WithWait(500*time.Millisecond))
	go func() { done <- w.Run(run) }()
	until(t, "the due jobs", func() bool { return seen.len() >= 20 })
	_ = srv.Process.Kill()
	_ = srv.Wait()
	time.Sleep(300 * time.Millisecond) // real time: the worker meets a dead server and keeps trying
	srv, _ = serve(t, dir, addr)
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	until(t, "every job after the restart", func() bool { return seen.len() == 40 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats(ctx, q)
	if err != nil || s.Scheduled != 0 || s.Leased != 0 || s.Dead != 0 {
		t.Fatalf("left behind: %+v %v", s, err)
	}
}

func TestWorkerStoppedMidJobFinishesAndAcksIt(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	q := "w-" + newID()[:10]
	if _, err := c.Enqueue(ctx, q, "slow", WithID("slow")); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var finished bool
	run, stop := context.WithCancel(ctx)
	w := NewWorker(c, q, func(ctx context.Context, j *Job) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished = true
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	<-started
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Fatal("Run returned before the running handler finished")
	}
	if _, err := c.Get(ctx, q, "slow"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the job is not acked: %v", err)
	}
}

func TestHandlerPastItsLeaseKeepsTheJob(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	q := "w-" + newID()[:10]
	if _, err := c.Enqueue(ctx, q, "long", WithID("long")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := 0
	run, stop := context.WithCancel(ctx)
	w := NewWorker(c, q, func(ctx context.Context, j *Job) error {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(2500 * time.Millisecond) // real time: over two lease lengths
		return nil
	}, WithLease(time.Second), WithConcurrency(2))
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	until(t, "the handler", func() bool { mu.Lock(); defer mu.Unlock(); return runs == 1 })
	time.Sleep(1500 * time.Millisecond)
	other, err := c.Claim(ctx, q, ClaimOptions{Max: 5})
	if err != nil || len(other.Jobs) != 0 {
		t.Fatalf("another consumer got the job while it ran: %v %v", other, err)
	}
	until(t, "the ack", func() bool { _, err := c.Get(ctx, q, "long"); return errors.Is(err, ErrNotFound) })
	stop()
	<-done
	if runs != 1 {
		t.Fatalf("ran %d times", runs)
	}
}

func TestTimeoutRetryInAndDeadLetter(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	q := "w-" + newID()[:10]
	for _, j := range []struct {
		id   string
		opts []EnqueueOption
	}{
		{"hang", []EnqueueOption{WithTimeout(200 * time.Millisecond), WithMaxAttempts(1)}},
		{"again", []EnqueueOption{WithMaxAttempts(3)}},
		{"poison", []EnqueueOption{WithMaxAttempts(5)}},
	} {
		if _, err := c.Enqueue(ctx, q, j.id, append(j.opts, WithID(j.id))...); err != nil {
			t.Fatal(err)
		}
	}
	run, stop := context.WithCancel(ctx)
	w := NewWorker(c, q, func(ctx context.Context, j *Job) error {
		switch {
		case j.ID == "hang":
			select {} // never returns
		case j.ID == "again" && j.Attempt == 1:
			return RetryIn(50*time.Millisecond, errors.New("busy"))
		case j.ID == "poison":
			return DeadLetter("cannot parse")
		}
		return nil
	}, WithConcurrency(4), WithWait(200*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	until(t, "the timeout", func() bool { j, err := c.Get(ctx, q, "hang"); return err == nil && j.State == "dead" })
	if j, _ := c.Get(ctx, q, "hang"); j.LastError != "timeout" {
		t.Fatalf("last error %q", j.LastError)
	}
	until(t, "the retried job", func() bool { _, err := c.Get(ctx, q, "again"); return errors.Is(err, ErrNotFound) })
	p, err := c.Get(ctx, q, "poison")
	if err != nil || p.State != "dead" || p.Attempt != 1 {
		t.Fatalf("poison: %+v %v", p, err)
	}
	stop()
	<-done
}

func TestEnqueuesCarryTheCallersTraceAndHandlersSeeIt(t *testing.T) {
	url := liveURL(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	type key struct{}
	// What an OpenTelemetry propagator reads from a context with an active span.
	traced := NewClient(url, WithTraceContext(func(ctx context.Context) (string, string) {
		if ctx.Value(key{}) == nil {
			return "", ""
		}
		return tp, "congo=t61rcWkgMzE"
	}))
	ctx := context.Background()
	q := "go-trace-" + newID()[:10]
	if _, err := traced.Enqueue(context.WithValue(ctx, key{}, true), q, 1, WithID("traced")); err != nil {
		t.Fatal(err)
	}
	if _, err := traced.Enqueue(ctx, q, 2, WithID("plain")); err != nil {
		t.Fatal(err)
	}
	own := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := traced.Enqueue(ctx, q, 3, WithID("own"), WithTraceparent(own, "")); err != nil {
		t.Fatal(err)
	}
	j, err := traced.Get(ctx, q, "traced")
	if err != nil || j.Traceparent != tp || j.Tracestate != "congo=t61rcWkgMzE" {
		t.Fatalf("get: %+v %v", j, err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	w := NewWorker(traced, q, func(_ context.Context, job *Job) error {
		mu.Lock()
		defer mu.Unlock()
		seen[job.ID] = job.Traceparent
		return nil
	})
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	until(t, "three jobs handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	stop()
	<-done
	if seen["traced"] != tp || seen["own"] != own || seen["plain"] != "" {
		t.Fatalf("handlers saw %v", seen)
	}
}

func TestAWorkerOverSeveralQueuesServesThemInOrderAndAClaimSharesByWeight(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	fill := func(q string, n int) {
		jobs := make([]BatchJob, n)
		for i := range jobs {
			jobs[i] = BatchJob{Payload: i, Options: []EnqueueOption{WithID(fmt.Sprintf("j%d", i))}}
		}
		if _, err := c.EnqueueBatch(ctx, q, jobs); err != nil {
			t.Fatal(err)
		}
	}
	first, second := "wq-"+newID()[:10], "wq-"+newID()[:10]
	fill(first, 20)
	fill(second, 20)
	var mu sync.Mutex
	var seen []string
	run, stop := context.WithCancel(ctx)
	w := NewQueuesWorker(c, []QueueWeight{{Name: first}, {Name: second}}, func(ctx context.Context, j *Job) error {
		mu.Lock()
		seen = append(seen, j.Queue)
		n := len(seen)
		mu.Unlock()
		if n == 40 {
			stop()
		}
		return nil
	}, WithConcurrency(1), WithStrict(), WithWait(200*time.Millisecond))
	if err := w.Run(run); err != nil {
		t.Fatal(err)
	}
	for i, q := range seen {
		want := first
		if i >= 20 {
			want = second
		}
		if q != want {
			t.Fatalf("strict order broken at %d: %v", i, seen)
		}
	}
	for _, q := range []string{first, second} {
		if _, err := c.Get(ctx, q, "j0"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s/j0 is not acked: %v", q, err)
		}
	}
	heavy, light := "wq-"+newID()[:10], "wq-"+newID()[:10]
	fill(heavy, 400)
	fill(light, 400)
	fromHeavy := 0
	for i := 0; i < 400; i++ {
		got, err := c.ClaimMany(ctx, []QueueWeight{{Name: heavy, Weight: 3}, {Name: light}}, ClaimManyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Jobs[0].Queue == heavy {
			fromHeavy++
		}
	}
	if fromHeavy < 255 || fromHeavy > 345 {
		t.Fatalf("%d of 400 claims from the weight-3 queue", fromHeavy)
	}
}

func TestAHandlersResultIsKeptWithTheDoneJob(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	q := "w-" + newID()[:10]
	if _, err := c.PutQueue(ctx, q, SettingsPatch{KeepDoneMs: Set(int64(600000))}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"mail", "bytes", "nothing", "huge"} {
		if _, err := c.Enqueue(ctx, q, id, WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	run, stop := context.WithCancel(ctx)
	w := NewWorker(c, q, func(ctx context.Context, j *Job) error {
		switch j.ID {
		case "mail":
			return j.SetResult(map[string]any{"sent": true, "id": j.ID})
		case "bytes":
			return j.SetResult([]byte{0, 255, 7})
		case "huge":
			return j.SetResult(strings.Repeat("x", 70000))
		}
		return nil
	}, WithWait(200*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	until(t, "every job settled", func() bool {
		s, err := c.Stats(ctx, q)
		return err == nil && s.Done+s.Dead == 4
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mail, err := c.Get(ctx, q, "mail")
	if err != nil || string(mail.Result) != `{"id":"mail","sent":true}` {
		t.Fatalf("mail: %+v %v", mail, err)
	}
	b, _ := c.Get(ctx, q, "bytes")
	if !reflect.DeepEqual(b.ResultBytes, []byte{0, 255, 7}) || b.Result != nil {
		t.Fatalf("bytes: %+v", b)
	}
	if n, _ := c.Get(ctx, q, "nothing"); n.State != "done" || n.Result != nil || n.ResultBytes != nil {
		t.Fatalf("nothing: %+v", n)
	}
	h, _ := c.Get(ctx, q, "huge")
	if h.State != "dead" || !strings.Contains(h.LastError, "over the limit of 65535 bytes") {
		t.Fatalf("huge: %+v", h)
	}
}
