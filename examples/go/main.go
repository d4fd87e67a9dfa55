// The order-timeout story: every new order gets a job that cancels it if it is still unpaid
// after a while; a payment cancels that job; a worker cancels the unpaid ones when their time
// comes.
//
//	go run . -url http://127.0.0.1:7070 -orders 10 -pay 3 -timeout 300ms
//
// Prints what happened as JSON and exits once every unpaid order is cancelled.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:7070", "the delayq server")
	orders := flag.Int("orders", 10, "orders to create")
	paid := flag.Int("pay", 3, "how many of them get paid")
	timeout := flag.Duration("timeout", 30*time.Minute, "how long an order may stay unpaid")
	flag.Parse()
	ctx := context.Background()
	queue := fmt.Sprintf("order-timeouts-%d", os.Getpid())
	client := delayq.NewClient(*url)

	// On order creation: schedule its cancellation. The order id is the job id, so a retried
	// request schedules one job.
	for n := 0; n < *orders; n++ {
		id := fmt.Sprintf("order-%d", n)
		if _, err := client.Enqueue(ctx, queue, map[string]string{"order_id": id},
			delayq.WithID(id), delayq.WithDelay(*timeout), delayq.WithMaxAttempts(5)); err != nil {
			log.Fatal(err)
		}
	}
	// On payment: the timeout must not fire any more.
	payments := map[string]string{}
	for n := 0; n < *paid; n++ {
		id := fmt.Sprintf("order-%d", n)
		r, err := client.Cancel(ctx, queue, id)
		if err != nil {
			log.Fatal(err)
		}
		payments[id] = string(r)
	}

	// The worker: cancel each unpaid order when its time comes.
	run, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var cancelled []string
	worker := delayq.NewWorker(client, queue, func(ctx context.Context, job *delayq.Job) error {
		var order struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(job.Payload, &order); err != nil {
			return delayq.DeadLetter("not an order: " + err.Error())
		}
		mu.Lock()
		defer mu.Unlock()
		cancelled = append(cancelled, order.OrderID)
		if len(cancelled) == *orders-*paid {
			stop()
		}
		return nil
	}, delayq.WithConcurrency(4))
	if err := worker.Run(run); err != nil {
		log.Fatal(err)
	}
	stats, err := client.Stats(ctx, queue)
	if err != nil {
		log.Fatal(err)
	}
	sort.Strings(cancelled)
	out, _ := json.Marshal(map[string]any{"created": *orders, "payments": payments, "cancelled": cancelled, "left": stats.Scheduled})
	fmt.Println(string(out))
}
