package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Markdown is a table of defs: name, type, default, valid values,
// whether it is dynamic, and its documentation line.
func Markdown(defs []Def) string {
	var sb strings.Builder
	sb.WriteString("| config | type | default | valid values | dynamic | what it does |\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, d := range defs {
		def, doc := d.Default, d.Doc
		if d.Topic != "" {
			t, _ := TopicDef(d.Topic)
			def, doc = t.Default, "the default of the topic config `"+d.Topic+"`"
			if d.Scale > 1 {
				def = ""
				if n, err := strconv.ParseInt(t.Default, 10, 64); err == nil && n%d.Scale == 0 {
					def = strconv.FormatInt(n/d.Scale, 10)
				}
				doc += fmt.Sprintf(" in units of %d ms (the ms config wins)", d.Scale)
			}
		}
		if def != "" {
			def = "`" + def + "`"
		}
		dyn := ""
		switch {
		case d.RunTime:
			dyn = "run time only"
		case d.Dynamic:
			dyn = "yes"
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, d.TypeName(), cell(def), cell(d.Range()), dyn, cell(doc))
	}
	return sb.String()
}

// Document is docs/configuration.md.
func Document() string {
	return `# Configuration

Generated from package config, seglog's one table of configurations (do not edit: ` + "`go test ./config -run TestDocs -update`" + `
writes it). Names are Kafka's; seglog's own start with ` + "`seglog.`" + `.

## Broker configs

What ` + "`seglog serve`" + ` takes, as lines of a ` + "`server.properties`" + ` (` + "`--config-file`" + `) or ` + "`--config key=value`" + `
(later ones win). A dynamic one may also change at run time, for one broker or the whole cluster, with AlterConfigs
(` + "`seglog configs --entity-type brokers --alter`" + `); "run time only" ones are set that way alone (a config file's are
ignored, a --config's refused). A config that names
a topic config is that config's default for the topics that do not set it.

` + Markdown(Broker) + `
## Topic configs

Set at CreateTopics and changed with AlterConfigs and IncrementalAlterConfigs (` + "`seglog topics --create --config`" + `,
` + "`seglog configs --entity-type topics --alter`" + `), and by the engine's commands' ` + "`--config`" + `.

` + Markdown(Topic)
}
