// Command scriptedworker is the scripted worker of the shared worker scenarios
// (clients/conformance/workers.json): this module's Worker running the handler the job's
// payload scripts, printing one JSON line per start and end. Configured by DELAYQ_URL,
// DELAYQ_QUEUES, DELAYQ_LEASE_MS, DELAYQ_CONCURRENCY and DELAYQ_GATES; stops gracefully on
// SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

type script struct {
	Do     string          `json:"do"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Ms     int64           `json:"ms"`
	Gate   string          `json:"gate"`
	Then   *script         `json:"then"`
}

var out sync.Mutex

func say(line map[string]any) {
	out.Lock()
	defer out.Unlock()
	raw, _ := json.Marshal(line)
	fmt.Println(string(raw))
}

func perform(ctx context.Context, s *script, j *delayq.Job) error {
	switch s.Do {
	case "ok":
		if len(s.Result) > 0 {
			return j.SetResult(s.Result)
		}
		return nil
	case "fail":
		return errors.New(s.Error)
	case "dead":
		return delayq.DeadLetter(s.Error)
	case "retry_in":
		if j.Attempt > 1 && s.Then != nil {
			return perform(ctx, s.Then, j)
		}
		return delayq.RetryIn(time.Duration(s.Ms)*time.Millisecond, errors.New("retry later"))
	case "hold":
		gate := filepath.Join(os.Getenv("DELAYQ_GATES"), s.Gate)
		for {
			if _, err := os.Stat(gate); err == nil {
				break
			}
			if ctx.Err() != nil {
				say(map[string]any{"aborted": j.ID})
				return ctx.Err()
			}
			time.Sleep(10 * time.Millisecond)
		}
		if s.Then != nil {
			return perform(ctx, s.Then, j)
		}
		return nil
	}
	return fmt.Errorf("no such script %q", s.Do)
}

func main() {
	var pairs [][2]any
	if err := json.Unmarshal([]byte(os.Getenv("DELAYQ_QUEUES")), &pairs); err != nil {
		panic(err)
	}
	queues := make([]delayq.QueueWeight, len(pairs))
	for i, p := range pairs {
		queues[i] = delayq.QueueWeight{Name: p[0].(string), Weight: int(p[1].(float64))}
	}
	lease, _ := strconv.Atoi(os.Getenv("DELAYQ_LEASE_MS"))
	conc, _ := strconv.Atoi(os.Getenv("DELAYQ_CONCURRENCY"))
	c := delayq.NewClient(os.Getenv("DELAYQ_URL"))
	w := delayq.NewQueuesWorker(c, queues, func(ctx context.Context, j *delayq.Job) error {
		say(map[string]any{"start": j.ID, "attempt": j.Attempt, "queue": j.Queue})
		defer say(map[string]any{"end": j.ID})
		var s script
		if err := json.Unmarshal(j.Payload, &s); err != nil {
			return err
		}
		return perform(ctx, &s, j)
	}, delayq.WithConcurrency(conc), delayq.WithLease(time.Duration(lease)*time.Millisecond),
		delayq.WithWait(time.Second), delayq.WithErrorLog(func(error) {}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	say(map[string]any{"ready": true})
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
