package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/server"
)

// A Go program runs a Kafka broker in its own process: a data directory,
// a loopback listener on a free port, and any Kafka client.
func Example() {
	dir, err := os.MkdirTemp("", "seglog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := server.New(context.Background(), server.Config{
		DataDir:   filepath.Join(dir, "data"),
		Listeners: []server.Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Listeners()[0].Addr.String()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("greetings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello, seglog")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		fmt.Printf("%s at offset %d\n", r.Value, r.Offset)
	})
	cl.Close()

	stop() // the broker answers what is in flight and closes the data directory cleanly
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: hello, seglog at offset 0
}
