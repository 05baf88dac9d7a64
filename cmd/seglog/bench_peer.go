package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seglog/seglog/broker"
)

// newBenchPeerCmd is `seglog bench-peer`, hidden: the serve workload's
// baselines as processes of their own, as seglog serve is — kfake (a
// Kafka in memory, franz-go's) or the null broker (the protocol and
// nothing else) — so that each is measured the same way, its CPU time and
// memory its own. It serves one topic on a loopback port, says where on
// stdout as seglog serve does, and ends at SIGTERM or SIGINT.
func newBenchPeerCmd() *cobra.Command {
	var kind, topic string
	var partitions int32
	cmd := &cobra.Command{
		Use:    "bench-peer",
		Short:  "serve a benchmark baseline (kfake or the null broker) on a loopback port",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			var addr string
			var stop func()
			switch kind {
			case "kfake":
				c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
				if err != nil {
					return err
				}
				addr, stop = c.ListenAddrs()[0], c.Close
			case "null":
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				b := broker.NewNull(map[string]int32{topic: partitions}, broker.Options{Logger: quietLogger(cmd)})
				done := make(chan error, 1)
				go func() { done <- b.Serve(ln) }()
				addr, stop = ln.Addr().String(), func() { b.Close(); <-done }
			default:
				return fmt.Errorf("bench-peer: --kind is kfake or null, not %q", kind)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving the Kafka protocol on %s\n", addr)
			<-sig
			stop()
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "kfake", "kfake or null")
	cmd.Flags().StringVar(&topic, "topic", "bench", "the topic served")
	cmd.Flags().Int32Var(&partitions, "partitions", 1, "its partitions")
	return cmd
}
