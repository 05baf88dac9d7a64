// Command seglog writes, reads, inspects and verifies seglog (Kafka-format)
// log directories.
//
//	seglog version
//	seglog produce --data-dir D --topic T [--partition P] [--config k=v]...
//	seglog append --data-dir D --topic T --batches FILE|- [--origin client|coordinator|replication]
//	seglog end-txn --data-dir D --topic T --producer-id ID --producer-epoch E --commit|--abort
//	seglog consume --data-dir D --topic T [--from-offset N|--from-time MS|--from earliest|latest]
//	seglog offsets --data-dir D [--topic T --partition P]
//	seglog dump [--print-data-log] [--json] FILE...
//	seglog recover --data-dir DIR [--json]
//	seglog verify --data-dir DIR [--topic T --partition P] [--json]
//	seglog bench WORKLOAD|all [--quick] [--json] [--report DIR]
//	seglog demo [--dir DIR]
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return exitCode(root.Execute(), stderr)
}

// exitCode prints a command's error for people on stderr and returns the
// exit status: 0 without one.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(stderr, "seglog:", seglog.Humanize(ex.msg))
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "seglog:", seglog.Humanize(err.Error()))
	return 1
}

// exitError ends the command with a status after its output is written.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.msg) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "seglog",
		Short:         "A Kafka-compatible local segment log engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newProduceCmd(), newAppendCmd(), newEndTxnCmd(), newConsumeCmd(), newOffsetsCmd(), newCompactCmd(),
		newDumpCmd(), newRecoverCmd(), newVerifyCmd(), newTierCmd(), newBenchCmd(), newDemoCmd(), newServeCmd(), newGroupsCmd(), newTransactionsCmd(), newUsersCmd(), newACLsCmd(), newQuotasCmd(), newTopicsCmd(), newConfigsCmd(), newClusterCmd(), newLeadersCmd(), newReassignCmd(), newBenchPeerCmd(), newPlaygroundCmd())
	return root
}
