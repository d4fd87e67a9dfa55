// Command enqueue is the client enqueue benchmark (docs/BENCHMARKS.md, "Clients"): N enqueues
// awaited one by one, due in an hour; prints jobs/s as JSON.
//
//	enqueue URL [jobs]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func main() {
	url := os.Args[1]
	jobs := 5000
	if len(os.Args) > 2 {
		jobs, _ = strconv.Atoi(os.Args[2])
	}
	ctx := context.Background()
	c := delayq.NewClient(url)
	queue := fmt.Sprintf("enqueue-go-%d", os.Getpid())
	pad := strings.Repeat("x", 39)
	if _, err := c.Enqueue(ctx, queue, map[string]bool{"warm": true}, delayq.WithDelay(time.Hour)); err != nil {
		panic(err)
	}
	start := time.Now()
	for i := 0; i < jobs; i++ {
		p := map[string]any{"orderId": i, "action": "cancel", "pad": pad}
		if _, err := c.Enqueue(ctx, queue, p, delayq.WithDelay(time.Hour)); err != nil {
			panic(err)
		}
	}
	s := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{"client": "go", "jobs": jobs, "seconds": s, "jobs_per_s": int(float64(jobs) / s)})
	fmt.Println(string(out))
}
