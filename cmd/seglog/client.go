package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// clientFlags reach a running broker, as Kafka's admin tools do:
// --bootstrap-server and --command-config (a client properties file:
// security.protocol, sasl.mechanism, sasl.username, sasl.password,
// ssl.ca.location, ssl.certificate.location, ssl.key.location — the
// password in a file, never on the command line).
type clientFlags struct {
	bootstrap, config string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.bootstrap, "bootstrap-server", "", "a running broker, host:port (instead of --data-dir)")
	cmd.Flags().StringVar(&f.config, "command-config", "", "with --bootstrap-server: a client properties file (security.protocol, sasl.*, ssl.*)")
}

// adminConn is an admin command's connection to a running broker, and
// the bound on its requests.
type adminConn struct {
	adm   *kadm.Client
	cl    *kgo.Client
	ctx   context.Context
	close func()
}

// dial connects to the broker; the caller calls close.
func (f *clientFlags) dial() (*adminConn, error) {
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	return &adminConn{adm: adm, cl: cl, ctx: ctx, close: func() { cancel(); cl.Close() }}, nil
}

// opts are the client options of --bootstrap-server and --command-config.
func (f *clientFlags) opts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(f.bootstrap, ",")...)}
	if f.config != "" {
		data, err := os.ReadFile(f.config)
		if err != nil {
			return nil, err
		}
		more, err := clientOpts(checkpoint.ParseProperties(data))
		if err != nil {
			return nil, fmt.Errorf("--command-config %s: %w", f.config, err)
		}
		opts = append(opts, more...)
	}
	return opts, nil
}

// admin connects to the broker; the caller closes the client.
func (f *clientFlags) admin() (*kadm.Client, *kgo.Client, error) {
	opts, err := f.opts()
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(2))...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// clientOpts turns a client properties file into franz-go options.
func clientOpts(p map[string]string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	proto := strings.ToUpper(p["security.protocol"])
	switch proto {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		cfg, err := broker.ClientTLS(p["ssl.ca.location"], p["ssl.certificate.location"], p["ssl.key.location"])
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	default:
		return nil, fmt.Errorf("security.protocol=%s: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	if strings.HasPrefix(proto, "SASL_") {
		mech, err := auth.ClientMechanism(p["sasl.mechanism"], p["sasl.username"], p["sasl.password"])
		if err != nil {
			return nil, fmt.Errorf("sasl.mechanism=%w", err)
		}
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// readPassword reads a password: the first line of file ("-": standard
// input), or, with no file, from the terminal without echo. Never from a
// flag's value.
func readPassword(cmd *cobra.Command, file string) (string, error) {
	var r io.Reader
	switch file {
	case "":
		in, ok := cmd.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return "", errors.New("a password is needed: --password-file FILE, or - for standard input")
		}
		fmt.Fprint(cmd.ErrOrStderr(), "Password: ")
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return "", err
		}
		return string(b), nil
	case "-":
		r = cmd.InOrStdin()
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("the password is empty")
	}
	return line, nil
}

// lockDataDir takes a data directory's lock for a command that reads
// (shared) or changes one of its security files; with mayCreate a missing
// data directory is made first (a new directory's first users and ACLs,
// before the first serve). The caller calls unlock.
func lockDataDir(cmd *cobra.Command, dir string, shared, mayCreate bool) (unlock func(), err error) {
	if dir == "" {
		return nil, errors.New("--data-dir is required")
	}
	if !isDataDir(dir) {
		if !mayCreate {
			return nil, fmt.Errorf("%s is not a data directory (no meta.properties)", dir)
		}
		m, err := openManager(cmd, dir, create)
		if err != nil {
			return nil, err
		}
		if err := m.Close(); err != nil {
			return nil, err
		}
	}
	lock, err := tablet.LockDir(vfs.OS, dir, shared)
	if err != nil {
		return nil, err
	}
	return func() { lock.Close() }, nil
}

// openSecurityFile opens one of a data directory's security files with
// open, under the directory's lock (lockDataDir).
func openSecurityFile[T any](cmd *cobra.Command, dir, file string, shared, mayCreate bool,
	open func(vfs.FS, string) (T, error)) (T, func(), error) {
	var zero T
	unlock, err := lockDataDir(cmd, dir, shared, mayCreate)
	if err != nil {
		return zero, nil, err
	}
	s, err := open(vfs.OS, filepath.Join(dir, file))
	if err != nil {
		unlock()
		return zero, nil, err
	}
	return s, unlock, nil
}
