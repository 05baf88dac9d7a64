package config

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "write docs/configuration.md and the README's table from the table")

const readmeBegin, readmeEnd = "<!-- config:topic begin (go test ./config -run TestDocs -update) -->\n", "<!-- config:topic end -->"

// docs/configuration.md and the README's table of topic configs are the
// table's (-update writes them).
func TestDocs(t *testing.T) {
	doc := Document()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	i, j := strings.Index(string(readme), readmeBegin), strings.Index(string(readme), readmeEnd)
	require.True(t, i >= 0 && j > i, "the README has the table's markers")
	wantReadme := string(readme[:i+len(readmeBegin)]) + "\n" + Markdown(Topic) + "\n" + string(readme[j:])
	if *update {
		require.NoError(t, os.WriteFile("../docs/configuration.md", []byte(doc), 0o644))
		require.NoError(t, os.WriteFile("../README.md", []byte(wantReadme), 0o644))
	}
	got, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	require.Equal(t, doc, string(got), "docs/configuration.md is not the table's: go test ./config -run TestDocs -update")
	require.Equal(t, wantReadme, string(readme), "the README's table is not the table's: go test ./config -run TestDocs -update")
}

// Every definition is whole: a type, a doc line (or a topic config it is
// the default of, which exists), a default that passes its own check.
func TestDefs(t *testing.T) {
	for _, defs := range [][]Def{Broker, Topic} {
		for _, d := range defs {
			require.NotZero(t, d.Type, d.Name)
			if d.Topic != "" {
				_, ok := TopicDef(d.Topic)
				require.True(t, ok, "%s: no topic config %s", d.Name, d.Topic)
				continue
			}
			require.NotEmpty(t, d.Doc, d.Name)
			if d.Default != "" {
				require.NoError(t, d.Check(d.Default), d.Name)
			}
		}
	}
}

// Check holds a value to its type, bounds and values.
func TestCheck(t *testing.T) {
	seg, _ := TopicDef("segment.bytes")
	require.NoError(t, seg.Check("1024"))
	require.Error(t, seg.Check("16"), "below its least")
	require.Error(t, seg.Check("4294967296"), "above an int")
	require.Error(t, seg.Check("x"))
	pol, _ := TopicDef("cleanup.policy")
	require.NoError(t, pol.Check("compact, delete"))
	require.Error(t, pol.Check("compact,forever"))
	ratio, _ := TopicDef("min.cleanable.dirty.ratio")
	require.NoError(t, ratio.Check("0.9"))
	require.Error(t, ratio.Check("1.5"))
	require.Error(t, ratio.Check("NaN"))
	b, _ := TopicDef("preallocate")
	require.Error(t, b.Check("yes"))
	auth, _ := BrokerDef("ssl.client.auth")
	require.Error(t, auth.Check("sometimes"))
	require.Equal(t, "none, requested, required", auth.Range())
	require.Equal(t, "[17, 2³¹−1]", seg.Range())
}

// A Type is the number DescribeConfigs sends for it.
func TestTypeNumbers(t *testing.T) {
	for typ, n := range map[Type]int8{Boolean: 1, String: 2, Int: 3, Short: 4, Long: 5, Double: 6, List: 7, Class: 8, Password: 9} {
		require.Equal(t, n, int8(typ), typ.String())
	}
	require.Equal(t, "long", Def{Type: Long}.TypeName())
}
