package auth

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/seglog/seglog"
)

// PrincipalRules are Kafka's ssl.principal.mapping.rules: each rule,
// tried in order, maps a client certificate's subject (its RFC 2253 form,
// CN=app,OU=eng,O=example) to a user name —
//
//	RULE:pattern/replacement/[L|U]   the first rule whose pattern matches the whole subject
//	DEFAULT                          the subject as it is
//
// — the replacement's $1… naming the pattern's groups, L or U lower- or
// upper-casing the result. A subject no rule matches is refused, as Kafka
// refuses it.
type PrincipalRules struct {
	rules []principalRule
}

type principalRule struct {
	def         bool
	re          *regexp.Regexp
	replacement string
	fold        byte // 'L', 'U' or 0
}

var javaGroup = regexp.MustCompile(`\$(\d+)`)

// ErrNoPrincipalRule is a subject no rule maps.
var ErrNoPrincipalRule = seglog.NewKafkaError("auth: no ssl.principal.mapping.rules rule matches the certificate's subject", 58)

// ParsePrincipalRules reads ssl.principal.mapping.rules ("" is DEFAULT).
// A rule's pattern and replacement may hold commas and escaped slashes
// (\/), as Kafka's do.
func ParsePrincipalRules(s string) (*PrincipalRules, error) {
	p := &PrincipalRules{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			p.rules = append(p.rules, principalRule{def: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			pattern, after, ok := cutUnescaped(rest[len("RULE:"):])
			if !ok {
				return nil, fmt.Errorf("auth: ssl.principal.mapping.rules %q: a RULE is RULE:pattern/replacement/[LU]", s)
			}
			replacement, after, ok := cutUnescaped(after)
			if !ok {
				return nil, fmt.Errorf("auth: ssl.principal.mapping.rules %q: a RULE is RULE:pattern/replacement/[LU]", s)
			}
			// Java's $1 is Go's ${1} ($1x would be a group named 1x).
			r := principalRule{replacement: javaGroup.ReplaceAllString(strings.ReplaceAll(replacement, `\/`, "/"), "$${$1}")}
			if after != "" && (after[0] == 'L' || after[0] == 'U') {
				r.fold, after = after[0], after[1:]
			}
			re, err := regexp.Compile("^(?:" + strings.ReplaceAll(pattern, `\/`, "/") + ")$")
			if err != nil {
				return nil, fmt.Errorf("auth: ssl.principal.mapping.rules: %w", err)
			}
			r.re, rest = re, after
			p.rules = append(p.rules, r)
		default:
			return nil, fmt.Errorf("auth: ssl.principal.mapping.rules %q: %q is neither RULE: nor DEFAULT", s, rest)
		}
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("auth: ssl.principal.mapping.rules %q: rules are separated by commas", s)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return p, nil
}

// cutUnescaped splits s at its first slash not escaped by a backslash.
func cutUnescaped(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// Map returns the user name a subject maps to.
func (p *PrincipalRules) Map(subject string) (string, error) {
	for _, r := range p.rules {
		if r.def {
			return subject, nil
		}
		m := r.re.FindStringSubmatchIndex(subject)
		if m == nil {
			continue
		}
		name := string(r.re.ExpandString(nil, r.replacement, subject, m))
		switch r.fold {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNoPrincipalRule, subject)
}
