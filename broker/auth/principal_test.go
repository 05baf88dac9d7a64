package auth

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrincipalRules: Kafka's ssl.principal.mapping.rules, on the
// examples of Kafka's documentation and its tests.
func TestPrincipalRules(t *testing.T) {
	for _, c := range []struct {
		rules, subject, want string
	}{
		{"", "CN=app,OU=eng", "CN=app,OU=eng"},
		{"DEFAULT", "CN=app", "CN=app"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=kafka-app,OU=ServiceUsers,O=Unknown", "kafka-app"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=adminUser,OU=Admin,O=Unknown", "CN=adminUser,OU=Admin,O=Unknown"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`,
			"CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US", "duke@javasoft"},
		{`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT`, "OU=x,CN=svc.one,O=y", "SVC.ONE"},
		{`RULE:^CN=(.*?)\/(.*)$/$1_$2\/x/`, "CN=a/b", "a_b/x"},
	} {
		p, err := ParsePrincipalRules(c.rules)
		require.NoError(t, err, c.rules)
		got, err := p.Map(c.subject)
		require.NoError(t, err, c.rules)
		require.Equal(t, c.want, got, "%s on %s", c.rules, c.subject)
	}
	p, err := ParsePrincipalRules(`RULE:^CN=(.*)$/$1/`)
	require.NoError(t, err)
	_, err = p.Map("OU=no-cn")
	require.ErrorIs(t, err, ErrNoPrincipalRule, "no DEFAULT: an unmatched subject is refused")
	for _, bad := range []string{"RULE:^x$", "RULE:^x$/y", "RULE:(/y/", "NONSENSE", "DEFAULT DEFAULT"} {
		_, err := ParsePrincipalRules(bad)
		require.Error(t, err, bad)
	}
}
