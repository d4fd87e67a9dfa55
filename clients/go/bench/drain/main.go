// The client drain benchmark (docs/BENCHMARKS.md, "Clients"): enqueue N no-op jobs (not
// timed), then one Worker at concurrency C drains them; prints jobs/s as JSON.
//
//	go run ./bench/drain URL [jobs] [concurrency]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func main() {
	url := os.Args[1]
	jobs, conc := 20000, 16
	if len(os.Args) > 2 {
		jobs, _ = strconv.Atoi(os.Args[2])
	}
	if len(os.Args) > 3 {
		conc, _ = strconv.Atoi(os.Args[3])
	}
	ctx := context.Background()
	c := delayq.NewClient(url)
	queue := fmt.Sprintf("drain-go-%d", os.Getpid())
	pad := strings.Repeat("x", 39)
	for i := 0; i < jobs; i += 1000 {
		var batch []delayq.BatchJob
		for k := i; k < i+1000 && k < jobs; k++ {
			id := fmt.Sprintf("1%019d", k)
			batch = append(batch, delayq.BatchJob{
				Payload: map[string]string{"orderId": id, "action": "cancel", "pad": pad},
				Options: []delayq.EnqueueOption{delayq.WithID(id)},
			})
		}
		if _, err := c.EnqueueBatch(ctx, queue, batch); err != nil {
			panic(err)
		}
	}
	var done int64
	run, stop := context.WithCancel(ctx)
	start := time.Now()
	w := delayq.NewWorker(c, queue, func(ctx context.Context, j *delayq.Job) error {
		if atomic.AddInt64(&done, 1) == int64(jobs) {
			stop()
		}
		return nil
	}, delayq.WithConcurrency(conc))
	if err := w.Run(run); err != nil {
		panic(err)
	}
	s := time.Since(start).Seconds()
	st, _ := c.Stats(ctx, queue)
	out, _ := json.Marshal(map[string]any{"client": "go", "jobs": jobs, "concurrency": conc, "seconds": s,
		"jobs_per_s": int(float64(jobs) / s), "left": st.Scheduled + st.Leased})
	fmt.Println(string(out))
}
