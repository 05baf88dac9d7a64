package tablet

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/config"
)

// The engine's topic configs are package config's table's: each key is
// defined there, its default is DefaultConfig's, and Set takes what the
// table's Check takes (at and past its bounds, a non-number, the default).
func TestConfigKeysAreTheTables(t *testing.T) {
	def := DefaultConfig()
	for _, key := range ConfigKeys() {
		d, ok := config.TopicDef(key)
		require.True(t, ok, "%s is not in package config's table", key)
		v, _ := def.Get(key)
		require.Equal(t, d.Default, v, "%s: the table's default", key)
		probes := []string{"x", d.Default, "true"}
		if d.Min != 0 || d.Max != 0 {
			for _, f := range []float64{d.Min - 1, d.Min, d.Max, d.Max * 2} {
				if f > -1e18 && f < 1e18 {
					probes = append(probes, strconv.FormatFloat(f, 'f', -1, 64))
				}
			}
		}
		probes = append(probes, d.Values...)
		for _, v := range probes {
			var c Config = def
			require.Equal(t, d.Check(v) == nil, c.Set(key, v) == nil, "%s=%s: the table's check and Set differ", key, v)
		}
	}
}
