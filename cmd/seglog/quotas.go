package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/seglog/seglog/broker/auth"
)

type quotasFlags struct {
	dataDir         string
	client          clientFlags
	describe, alter bool
	entityTypes     []string
	entityNames     []string
	defaults        int
	add             string
	del             []string
}

func newQuotasCmd() *cobra.Command {
	var f quotasFlags
	cmd := &cobra.Command{
		Use:   "quotas (--data-dir D | --bootstrap-server H:P) (--describe | --alter) [--entity-type T (--entity-name N | --entity-default)]...",
		Short: "Describe and alter client quotas, like kafka-configs.sh --entity-type users|clients|ips",
		Long: `quotas manages the client quotas a broker enforces (Kafka's, stored in the data
directory's seglog-client-quotas):

  producer_byte_rate, consumer_byte_rate   bytes a second (users, client ids)
  request_percentage                       percent of one thread's time (100 is one)
  controller_mutation_rate                 partitions created or deleted a second
  connection_creation_rate                 new connections a second (ips)

An entity is a user, a client id, a user and a client id, or an ip; each
--entity-type (users, clients, ips, or Kafka's singular names) takes an
--entity-name or --entity-default: the types take the names in the order
given, and the types left over are the defaults (so a user default with a
named client is --entity-type clients --entity-name app --entity-type users
--entity-default).

  --describe   the quotas of the entities given (all without one)
  --alter      --add-config k=v,k=v and/or --delete-config k (repeatable)

A client over its quota is told to wait (ThrottleMillis) and its connection's
next request waits it out; a connection over its ip's rate is refused. With
--data-dir it changes the directory itself, so a broker must not be serving it;
with --bootstrap-server it asks a running broker (DescribeClientQuotas,
AlterClientQuotas: DescribeConfigs or AlterConfigs on the cluster).

In a cluster (seglog.etcd.endpoints) the quotas are the cluster's, kept in
etcd: change them with --bootstrap-server, through any broker, and every broker
enforces the change. A data directory's file only seeds a cluster that has none
yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.describe == f.alter:
				return errors.New("give one of --describe, --alter")
			case (f.dataDir == "") == (f.client.bootstrap == ""):
				return errors.New("give --data-dir or --bootstrap-server")
			}
			entity, err := f.entity()
			if err != nil {
				return err
			}
			if f.describe {
				return quotasDescribe(cmd, f, entity)
			}
			ops, err := f.ops()
			if err != nil {
				return err
			}
			if len(entity) == 0 {
				return errors.New("--alter needs --entity-type")
			}
			return quotasAlter(cmd, f, entity, ops)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "", "the data directory (no broker serving it)")
	f.client.add(cmd)
	fl.BoolVar(&f.describe, "describe", false, "describe quotas")
	fl.BoolVar(&f.alter, "alter", false, "alter quotas")
	fl.StringArrayVar(&f.entityTypes, "entity-type", nil, "users, clients or ips (repeatable: a user and a client)")
	fl.StringArrayVar(&f.entityNames, "entity-name", nil, "the entity's name, for each --entity-type without --entity-default")
	fl.CountVar(&f.defaults, "entity-default", "the entity type's default (every user, client or ip without its own)")
	fl.StringVar(&f.add, "add-config", "", "with --alter: quota=value,...")
	fl.StringArrayVar(&f.del, "delete-config", nil, "with --alter: a quota to remove (repeatable)")
	return cmd
}

// anyName stands for every name of an entity type (--describe with
// --entity-type alone).
var anyName = "\x00any"

// entity pairs the entity types with the names (and defaults), in order:
// names first, then defaults, as kafka-configs.sh pairs them.
func (f quotasFlags) entity() (auth.Entity, error) {
	e := auth.Entity{}
	every := f.describe && len(f.entityNames)+f.defaults == 0 // every entity of the types, as kafka-configs.sh lists them
	if len(f.entityNames)+f.defaults != len(f.entityTypes) && !every {
		return nil, errors.New("each --entity-type needs an --entity-name or an --entity-default")
	}
	for i, t := range f.entityTypes {
		typ, ok := map[string]string{"users": auth.EntityUser, "user": auth.EntityUser, "clients": auth.EntityClientID,
			"client-id": auth.EntityClientID, "ips": auth.EntityIP, "ip": auth.EntityIP}[t]
		if !ok {
			return nil, fmt.Errorf("--entity-type %s: users, clients or ips", t)
		}
		switch {
		case every:
			e[typ] = &anyName
		case i < len(f.entityNames):
			name := f.entityNames[i]
			e[typ] = &name
		default:
			e[typ] = nil
		}
	}
	if len(e) > 0 && !every {
		if err := e.Check(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (f quotasFlags) ops() ([]auth.QuotaOp, error) {
	var ops []auth.QuotaOp
	for _, kv := range strings.Split(f.add, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("--add-config %q: quota=number", kv)
		}
		ops = append(ops, auth.QuotaOp{Key: k, Value: n})
	}
	for _, k := range f.del {
		ops = append(ops, auth.QuotaOp{Key: k, Remove: true})
	}
	if len(ops) == 0 {
		return nil, errors.New("--alter needs --add-config or --delete-config")
	}
	return ops, nil
}

func quotasDescribe(cmd *cobra.Command, f quotasFlags, entity auth.Entity) error {
	var entries []auth.QuotaEntry
	if f.client.bootstrap != "" {
		c, err := f.client.dial()
		if err != nil {
			return err
		}
		defer c.close()
		adm, ctx := c.adm, c.ctx
		var comps []kadm.DescribeClientQuotaComponent
		for typ, name := range entity {
			c := kadm.DescribeClientQuotaComponent{Type: typ, MatchName: name}
			switch {
			case name == &anyName:
				c.MatchType, c.MatchName = 2, nil // any: every name and the default
			case name == nil:
				c.MatchType = 1
			}
			comps = append(comps, c)
		}
		described, err := adm.DescribeClientQuotas(ctx, len(entity) > 0, comps)
		if err != nil {
			return err
		}
		for _, d := range described {
			e := auth.QuotaEntry{Entity: auth.Entity{}, Values: map[string]float64{}}
			for _, c := range d.Entity {
				e.Entity[c.Type] = c.Name
			}
			for _, v := range d.Values {
				e.Values[v.Key] = v.Value
			}
			entries = append(entries, e)
		}
	} else {
		q, unlock, err := openSecurityFile(cmd, f.dataDir, auth.QuotasFile, true, false, auth.OpenQuotas)
		if err != nil {
			return err
		}
		defer unlock()
		for _, e := range q.Entries() {
			if len(entity) == 0 || e.Entity.Key() == entity.Key() || matchesAny(e.Entity, entity) {
				entries = append(entries, e)
			}
		}
	}
	printQuotas(cmd.OutOrStdout(), entries)
	return nil
}

func quotasAlter(cmd *cobra.Command, f quotasFlags, entity auth.Entity, ops []auth.QuotaOp) error {
	if f.client.bootstrap != "" {
		c, err := f.client.dial()
		if err != nil {
			return err
		}
		defer c.close()
		adm, ctx := c.adm, c.ctx
		var ke kadm.ClientQuotaEntity
		for typ, name := range entity {
			ke = append(ke, kadm.ClientQuotaEntityComponent{Type: typ, Name: name})
		}
		var kops []kadm.AlterClientQuotaOp
		for _, op := range ops {
			kops = append(kops, kadm.AlterClientQuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ke, Ops: kops}})
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
			}
		}
	} else {
		q, unlock, err := openSecurityFile(cmd, f.dataDir, auth.QuotasFile, false, false, auth.OpenQuotas)
		if err != nil {
			return err
		}
		defer unlock()
		errs, err := q.Alter([]auth.Entity{entity}, [][]auth.QuotaOp{ops}, false)
		if err != nil {
			return err
		}
		if errs[0] != nil {
			return errs[0]
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Completed updating config for %s.\n", entityString(entity))
	return nil
}

// entityString names an entity as kafka-configs.sh does: user-principal
// 'alice', client-id 'app', the default as <default>.
func entityString(e auth.Entity) string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(e)) {
		name := "<default>"
		if e[typ] != nil {
			name = "'" + *e[typ] + "'"
		}
		label := map[string]string{auth.EntityUser: "user-principal", auth.EntityClientID: "client-id", auth.EntityIP: "ip"}[typ]
		parts = append(parts, label+" "+name)
	}
	return strings.Join(parts, ", ")
}

func printQuotas(w io.Writer, entries []auth.QuotaEntry) {
	for _, e := range entries {
		var vals []string
		for _, k := range slices.Sorted(maps.Keys(e.Values)) {
			vals = append(vals, k+"="+strconv.FormatFloat(e.Values[k], 'f', -1, 64))
		}
		fmt.Fprintf(w, "Quota configs for %s are %s\n", entityString(e.Entity), strings.Join(vals, ", "))
	}
}

// matchesAny reports whether an entity has exactly the types of a
// describe by types alone (each named anyName).
func matchesAny(e, want auth.Entity) bool {
	if len(e) != len(want) {
		return false
	}
	for typ, name := range want {
		if name != &anyName {
			return false
		}
		if _, ok := e[typ]; !ok {
			return false
		}
	}
	return true
}
