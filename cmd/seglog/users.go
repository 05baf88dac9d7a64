package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/seglog/seglog/broker/auth"
)

type usersFlags struct {
	dataDir      string
	client       clientFlags
	list         bool
	add, del     string
	mechanisms   []string
	iterations   int
	passwordFile string
}

func newUsersCmd() *cobra.Command {
	var f usersFlags
	cmd := &cobra.Command{
		Use:   "users (--data-dir D | --bootstrap-server H:P) (--list | --add USER | --delete USER)",
		Short: "List, add and delete the SASL/SCRAM users a broker authenticates, like kafka-configs.sh --entity-type users",
		Long: `users manages the SCRAM credentials SASL_PLAINTEXT and SASL_SSL listeners
check (SCRAM-SHA-256, SCRAM-SHA-512, and PLAIN against them). They are stored
salted and hashed (RFC 5802's StoredKey and ServerKey, never the password) in the
data directory's seglog-scram-credentials, readable by its owner only.

  --list                the users and their mechanisms and iteration counts
  --add USER            set USER's password (for each --mechanism, default both)
  --delete USER         delete USER's credentials (each --mechanism, default all)

The password comes from --password-file FILE (its first line; - for standard
input) or, on a terminal, a prompt: never from a flag's value.

With --data-dir it changes the directory itself, so a broker must not be serving
it (it takes the data directory's lock; --add creates a new data directory, to
set up the first users before the first serve). With --bootstrap-server it asks
a running broker (DescribeUserScramCredentials, AlterUserScramCredentials, which
need the Describe and Alter operations on the cluster once ACLs are on), with
--command-config for the client's own security settings.

In a cluster (seglog.etcd.endpoints) the credentials are the cluster's, kept in
etcd: change them with --bootstrap-server, through any broker, and every broker
has the change. A data directory's file only seeds a cluster that has none yet
(its first broker's, from its days as a single node).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			actions := 0
			for _, a := range []bool{f.list, f.add != "", f.del != ""} {
				if a {
					actions++
				}
			}
			switch {
			case actions != 1:
				return errors.New("give one of --list, --add USER, --delete USER")
			case (f.dataDir == "") == (f.client.bootstrap == ""):
				return errors.New("give --data-dir or --bootstrap-server")
			}
			var mechs []string
			for _, m := range f.mechanisms {
				m = strings.ToUpper(m)
				if auth.MechanismNumber(m) == 0 {
					return fmt.Errorf("--mechanism %s: SCRAM-SHA-256 or SCRAM-SHA-512", m)
				}
				mechs = append(mechs, m)
			}
			if len(mechs) == 0 && f.add != "" {
				mechs = []string{auth.SHA256, auth.SHA512}
			}
			var password string
			if f.add != "" {
				if f.iterations < auth.MinIterations || f.iterations > auth.MaxIterations {
					return fmt.Errorf("--iterations %d: %w", f.iterations, auth.ErrIterations)
				}
				var err error
				if password, err = readPassword(cmd, f.passwordFile); err != nil {
					return err
				}
			}
			if f.client.bootstrap != "" {
				return usersOnline(cmd, f, mechs, password)
			}
			return usersOffline(cmd, f, mechs, password)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "", "the data directory (no broker serving it)")
	f.client.add(cmd)
	fl.BoolVar(&f.list, "list", false, "list the users")
	fl.StringVar(&f.add, "add", "", "set this user's password")
	fl.StringVar(&f.del, "delete", "", "delete this user's credentials")
	fl.StringSliceVar(&f.mechanisms, "mechanism", nil, "SCRAM-SHA-256, SCRAM-SHA-512 (repeatable; default both)")
	fl.IntVar(&f.iterations, "iterations", auth.MinIterations, "with --add: the PBKDF2 iteration count (4096 to 16384)")
	fl.StringVar(&f.passwordFile, "password-file", "", "with --add: a file whose first line is the password (- for standard input)")
	return cmd
}

// usersOffline changes the data directory's credentials file, under the
// directory's lock.
func usersOffline(cmd *cobra.Command, f usersFlags, mechs []string, password string) (err error) {
	creds, unlock, err := openSecurityFile(cmd, f.dataDir, auth.CredentialsFile, f.list, f.add != "", auth.OpenCredentials)
	if err != nil {
		return err
	}
	defer unlock()
	users := creds.Users()
	if f.list {
		printUsers(cmd.OutOrStdout(), users)
		return nil
	}
	var changes []auth.Change
	if f.add != "" {
		for _, mech := range mechs {
			salt, salted, err := auth.SaltPassword(mech, password, f.iterations)
			if err != nil {
				return err
			}
			changes = append(changes, auth.Change{User: f.add, Mechanism: mech, Salt: salt, Iterations: f.iterations, SaltedPassword: salted})
		}
	} else {
		if len(mechs) == 0 {
			mechs = slices.Sorted(maps.Keys(users[f.del]))
		}
		if len(mechs) == 0 {
			return fmt.Errorf("user %q has no credentials", f.del)
		}
		for _, mech := range mechs {
			changes = append(changes, auth.Change{User: f.del, Mechanism: mech})
		}
	}
	errs, err := creds.Apply(changes)
	if err != nil {
		return err
	}
	for i, e := range errs {
		if e != nil {
			return fmt.Errorf("user %q %s: %w", changes[i].User, changes[i].Mechanism, e)
		}
	}
	printChanged(cmd.OutOrStdout(), f)
	return nil
}

// usersOnline asks a running broker.
func usersOnline(cmd *cobra.Command, f usersFlags, mechs []string, password string) error {
	c, err := f.client.dial()
	if err != nil {
		return err
	}
	defer c.close()
	adm, ctx := c.adm, c.ctx
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		return err
	}
	if f.list {
		users := map[string]map[string]int{}
		for user, d := range described {
			if d.Err != nil {
				return fmt.Errorf("user %q: %w", user, d.Err)
			}
			users[user] = map[string]int{}
			for _, ci := range d.CredInfos {
				users[user][ci.Mechanism.String()] = int(ci.Iterations)
			}
		}
		printUsers(cmd.OutOrStdout(), users)
		return nil
	}
	var ups []kadm.UpsertSCRAM
	var dels []kadm.DeleteSCRAM
	for _, mech := range mechs {
		m := kadm.ScramMechanism(auth.MechanismNumber(mech))
		if f.add != "" {
			ups = append(ups, kadm.UpsertSCRAM{User: f.add, Mechanism: m, Iterations: int32(f.iterations), Password: password})
		} else {
			dels = append(dels, kadm.DeleteSCRAM{User: f.del, Mechanism: m})
		}
	}
	if f.del != "" && len(mechs) == 0 {
		for _, ci := range described[f.del].CredInfos {
			dels = append(dels, kadm.DeleteSCRAM{User: f.del, Mechanism: ci.Mechanism})
		}
		if len(dels) == 0 {
			return fmt.Errorf("user %q has no credentials", f.del)
		}
	}
	res, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return err
	}
	for user, r := range res {
		if r.Err != nil {
			return fmt.Errorf("user %q: %w", user, r.Err)
		}
	}
	printChanged(cmd.OutOrStdout(), f)
	return nil
}

// printUsers prints the users as kafka-configs.sh describes them.
func printUsers(w io.Writer, users map[string]map[string]int) {
	for _, user := range slices.Sorted(maps.Keys(users)) {
		var parts []string
		for _, mech := range slices.Sorted(maps.Keys(users[user])) {
			parts = append(parts, fmt.Sprintf("%s=iterations=%d", mech, users[user][mech]))
		}
		fmt.Fprintf(w, "SCRAM credential configs for user-principal '%s' are %s\n", user, strings.Join(parts, ", "))
	}
}

func printChanged(w io.Writer, f usersFlags) {
	user := f.add + f.del
	fmt.Fprintf(w, "Completed updating config for user %s.\n", user)
}
