package state

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

var rewrite = flag.Bool("rewrite", false, "write the scenarios' expected output (testdata/*.txt) from what the rules do")

// The scenarios of testdata/*.txt, each a story of one replica told as
// events (etcd raft's data-driven tests): a block is a command, "----",
// and what it returns — the replica's actions and, after the command, its
// role. The stories are the rules and the faults the fault checker and
// the model found; -rewrite writes what the rules do now (then read the
// diff).
//
// Commands (key=value arguments; lists comma-separated; times in
// seconds from the story's start):
//
//	new me=1 lag=30                    a replica of broker me (a new story: session 1, an empty log at time 0)
//	log end=10 hw=0 start=0 now=0      what the next events read of the log and the clock
//	session id=1                       the session the next events run in (0: not certainly alive)
//	meta leader=1 epoch=5 pe=10 isr=1,2,3 [replicas=1,2,3] [min=2] [may] [session=1]
//	led start=10 | lead-failed | close | appended | tick
//	fetch from=2 epoch=5 offset=13 [logstart=0]
//	written isr=1,2 pe=11 | failed
//	await id=1 end=13 | cancel id=1
//	check leader epoch=5 | check append acks=-1 | check hw | check read epoch=5 | follows leader=2 epoch=4
//	truncate epochs=1@0,3@10 end=30 hw=8 leader-epoch=3 leader-end=15
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			got := runScenario(t, string(data))
			if *rewrite {
				require.NoError(t, os.WriteFile(f, []byte(got), 0o644))
				return
			}
			require.Equal(t, string(data), got, "%s: the rules do otherwise (go test ./replica/state -run TestScenarios -rewrite writes what they do)", f)
		})
	}
}

// scenario is a story's replica and what its events read.
type scenario struct {
	t       *testing.T
	p       *Partition
	l       Local
	session int64
}

// runScenario runs a story's commands and returns it with each one's
// output as the rules give it.
func runScenario(t *testing.T, text string) string {
	sc := &scenario{t: t, p: New(1, 30*time.Second), session: 1}
	sc.l = Local{Now: t0, Session: 1}
	var out strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		var cmd []string
		for _, line := range strings.Split(block, "\n") {
			if line == "----" {
				break
			}
			cmd = append(cmd, line)
		}
		for _, line := range cmd {
			out.WriteString(line + "\n")
		}
		var result string
		for _, line := range cmd {
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			result = sc.run(line)
		}
		if result != "" {
			out.WriteString("----\n" + result + "\n")
		}
		out.WriteString("\n")
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func (sc *scenario) run(line string) string {
	fields := strings.Fields(line)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	num := func(k string, def int64) int64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(sc.t, err, line)
		return n
	}
	ids := func(k string) []int32 {
		var out []int32
		for _, s := range strings.Split(args[k], ",") {
			if s != "" {
				n, err := strconv.ParseInt(s, 10, 32)
				require.NoError(sc.t, err, line)
				out = append(out, int32(n))
			}
		}
		if out == nil {
			out = []int32{}
		}
		return out
	}
	var a Actions
	switch cmd := strings.Join(fields[:min(len(fields), 2)], " "); {
	case fields[0] == "new":
		sc.p = New(int32(num("me", 1)), time.Duration(num("lag", 30))*time.Second)
		sc.l, sc.session = Local{Now: t0, Session: 1}, 1 // (a story starts afresh)
		return "role " + sc.p.Role().String()
	case fields[0] == "log":
		sc.l.LogEnd, sc.l.HW, sc.l.LogStart = num("end", sc.l.LogEnd), num("hw", sc.l.HW), num("start", sc.l.LogStart)
		sc.l.Now = t0.Add(time.Duration(num("now", int64(sc.l.Now.Sub(t0)/time.Second))) * time.Second)
		return ""
	case fields[0] == "session":
		sc.session = num("id", 1)
		sc.l.Session = sc.session
		return ""
	case fields[0] == "meta":
		replicas := []int32{1, 2, 3}
		if _, ok := args["replicas"]; ok {
			replicas = ids("replicas")
		}
		_, may := args["may"]
		m := Meta{Leader: int32(num("leader", -1)), LeaderEpoch: int32(num("epoch", 0)), PartitionEpoch: int32(num("pe", 0)),
			ISR: ids("isr"), Replicas: replicas, MinISR: int(num("min", 2)), MayLead: may, Session: num("session", sc.session)}
		a = sc.p.SetMeta(m, sc.l)
	case fields[0] == "led":
		a = sc.p.Led(num("start", sc.l.LogEnd), sc.l)
	case fields[0] == "lead-failed":
		a = sc.p.LeadFailed(sc.l)
	case fields[0] == "close":
		a = sc.p.Close(sc.l)
	case fields[0] == "appended":
		a = sc.p.Appended(sc.l)
	case fields[0] == "tick":
		a = sc.p.Tick(sc.l)
	case fields[0] == "fetch":
		var code int16
		code, a = sc.p.FollowerFetch(int32(num("from", 2)), int32(num("epoch", -1)), num("offset", 0), num("logstart", 0), sc.l)
		return sc.render(a, code, true)
	case fields[0] == "written":
		a = sc.p.ISRWritten(ids("isr"), int32(num("pe", 0)), sc.l)
	case fields[0] == "failed":
		a = sc.p.ISRFailed(sc.l)
	case fields[0] == "await":
		a = sc.p.AwaitAck(uint64(num("id", 1)), num("end", 0), sc.l)
	case fields[0] == "cancel":
		sc.p.CancelAck(uint64(num("id", 1)))
		return fmt.Sprintf("pending %d", sc.p.Pending())
	case cmd == "check leader":
		return "code " + codeName(sc.p.CheckLeader(int32(num("epoch", -1)), sc.l.Session))
	case cmd == "check append":
		return "code " + codeName(sc.p.CheckAppend(int16(num("acks", -1)), sc.l.Session))
	case cmd == "check hw":
		return "code " + codeName(sc.p.CheckHighWatermark(sc.l.HW))
	case cmd == "check read":
		return "code " + codeName(sc.p.CheckFollowerRead(int32(num("epoch", -1))))
	case fields[0] == "follows":
		return strconv.FormatBool(sc.p.Follows(int32(num("leader", 2)), int32(num("epoch", 0))))
	case fields[0] == "truncate":
		var epochs []EpochStart
		for _, e := range strings.Split(args["epochs"], ",") {
			if e == "" {
				continue
			}
			ep, start, _ := strings.Cut(e, "@")
			n, err := strconv.ParseInt(ep, 10, 32)
			require.NoError(sc.t, err, line)
			s, err := strconv.ParseInt(start, 10, 64)
			require.NoError(sc.t, err, line)
			epochs = append(epochs, EpochStart{Epoch: int32(n), Start: s})
		}
		to := TruncationTarget(epochs, num("end", 0), num("hw", 0), int32(num("leader-epoch", -1)), num("leader-end", -1))
		if to >= num("end", 0) {
			return fmt.Sprintf("keep all (target %d)", to)
		}
		return fmt.Sprintf("truncate to %d", to)
	default:
		sc.t.Fatalf("unknown command %q", line)
	}
	return sc.render(a, 0, false)
}

// render prints an event's actions, in the order they are carried out,
// and the replica's role after it.
func (sc *scenario) render(a Actions, code int16, coded bool) string {
	var parts []string
	if coded {
		parts = append(parts, "code "+codeName(code))
	}
	if a.Ignored {
		parts = append(parts, "ignored (older)")
	}
	if a.StopFetching {
		parts = append(parts, "stop fetching")
	}
	if a.BecomeLeader {
		parts = append(parts, fmt.Sprintf("record epoch %d at the log end", sc.p.Meta().LeaderEpoch))
	}
	if a.Fetch {
		parts = append(parts, fmt.Sprintf("fetch from %d at epoch %d, truncating first", a.FetchLeader, a.FetchEpoch))
	}
	if a.SetHW {
		parts = append(parts, fmt.Sprintf("high watermark %d", a.HW))
		sc.l.HW = a.HW // (carried out)
	}
	if pr := a.Propose; pr != nil {
		parts = append(parts, fmt.Sprintf("propose ISR %s (%s) over partition epoch %d", join(pr.ISR), pr.Why, pr.PartitionEpoch))
	}
	for _, c := range a.Completed {
		parts = append(parts, fmt.Sprintf("ack %d: %s", c.ID, codeName(c.Code)))
	}
	switch a.Tell {
	case TellLeading:
		parts = append(parts, "tell: leading")
	case TellLost:
		parts = append(parts, "tell: lost")
	case TellReload:
		parts = append(parts, "tell: reload")
	}
	if a.Changed {
		parts = append(parts, "wake")
	}
	role := "role " + sc.p.Role().String()
	if sc.p.Role() == Leader {
		role += fmt.Sprintf(" at epoch %d, ISR %s", sc.p.Meta().LeaderEpoch, join(sc.p.Meta().ISR))
	}
	if f := sc.p.Following(); f != NoLeader {
		role += fmt.Sprintf(" following %d at epoch %d", f, sc.p.Meta().LeaderEpoch)
	}
	if len(parts) == 0 {
		return "nothing; " + role
	}
	return strings.Join(parts, "; ") + "; " + role
}

func join(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(s, ",") + "]"
}

func codeName(code int16) string {
	if code == 0 {
		return "ok"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}
