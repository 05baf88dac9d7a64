package auth

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuotasResolve: Kafka's precedence of quota entities, the entity
// checks, and the file surviving a reopen.
func TestQuotasResolve(t *testing.T) {
	path := filepath.Join(t.TempDir(), QuotasFile)
	q, err := OpenQuotas(nil, path)
	require.NoError(t, err)
	v, _ := q.Resolve("alice", "app", ProducerByteRate)
	require.Zero(t, v, "no quotas")
	s := func(v string) *string { return &v }
	set := func(e Entity, key string, v float64) error {
		errs, err := q.Alter([]Entity{e}, [][]QuotaOp{{{Key: key, Value: v}}}, false)
		require.NoError(t, err)
		return errs[0]
	}
	require.NoError(t, set(Entity{EntityClientID: nil}, ProducerByteRate, 1))
	require.NoError(t, set(Entity{EntityClientID: s("app")}, ProducerByteRate, 2))
	require.NoError(t, set(Entity{EntityUser: nil}, ProducerByteRate, 3))
	require.NoError(t, set(Entity{EntityUser: s("alice")}, ProducerByteRate, 4))
	require.NoError(t, set(Entity{EntityUser: s("alice"), EntityClientID: s("app")}, ProducerByteRate, 5))
	for _, c := range []struct {
		user, client string
		want         float64
	}{{"alice", "app", 5}, {"alice", "other", 4}, {"bob", "app", 3}, {"bob", "x", 3}} {
		v, entity := q.Resolve(c.user, c.client, ProducerByteRate)
		require.Equal(t, c.want, v, "%+v", c)
		require.NotEmpty(t, entity)
	}
	_, err = q.Alter([]Entity{{EntityUser: nil}}, [][]QuotaOp{{{Key: ProducerByteRate, Remove: true}}}, false)
	require.NoError(t, err)
	v, _ = q.Resolve("bob", "app", ProducerByteRate)
	require.Equal(t, 2.0, v, "the client's quota once no user default")

	require.ErrorIs(t, set(Entity{EntityUser: s("a"), EntityIP: s("1.2.3.4")}, ProducerByteRate, 1), ErrInvalidQuota)
	require.ErrorIs(t, set(Entity{"group": s("g")}, ProducerByteRate, 1), ErrInvalidQuota)
	require.ErrorIs(t, set(Entity{EntityUser: s("a")}, "unknown_rate", 1), ErrInvalidQuota)
	require.ErrorIs(t, set(Entity{EntityUser: s("a")}, ProducerByteRate, -1), ErrInvalidQuota)
	require.ErrorIs(t, set(Entity{EntityIP: s("not-an-ip")}, ConnectionCreationRate, 1), ErrInvalidQuota)
	require.NoError(t, set(Entity{EntityIP: nil}, ConnectionCreationRate, 7))
	require.NoError(t, set(Entity{EntityIP: s("10.0.0.1")}, ConnectionCreationRate, 8))
	require.Equal(t, 8.0, q.ConnectionRate("10.0.0.1"))
	require.Equal(t, 7.0, q.ConnectionRate("10.0.0.2"), "the default IP's")

	errs, err := q.Alter([]Entity{{EntityUser: s("carol")}}, [][]QuotaOp{{{Key: ConsumerByteRate, Value: 9}}}, true)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	v, _ = q.Resolve("carol", "", ConsumerByteRate)
	require.Zero(t, v, "validate only")

	again, err := OpenQuotas(nil, path)
	require.NoError(t, err)
	require.Equal(t, q.Entries(), again.Entries())
}
