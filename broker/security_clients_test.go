package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKafkajsSCRAM: kafkajs authenticates with SCRAM-SHA-256 over
// SASL_SSL, produces and consumes in a group; a wrong password is refused.
func TestKafkajsSCRAM(t *testing.T) {
	run := kafkajs(t)
	sb := serveSecure(t, Options{}, TLSOptions{}, map[string]string{"alice": "alice-secret"})
	run("sasl.js", sb.addrs[ProtocolSASLSSL], sb.pki.CAFile, "alice", "alice-secret")
	require.NotContains(t, sb.logs.String(), "alice-secret")
}

// pythonMTLS produces and consumes with confluent-kafka over an SSL
// listener that requires client certificates: python3 -c SCRIPT ADDR CA
// CERT KEY; with no certificate it must be refused.
const pythonMTLS = `
import sys, time
from confluent_kafka import Producer, Consumer, KafkaException
addr, ca, cert, key = sys.argv[1:5]
tls = {'bootstrap.servers': addr, 'security.protocol': 'SSL', 'ssl.ca.location': ca,
       'ssl.certificate.location': cert, 'ssl.key.location': key}
p = Producer(dict(tls))
for i in range(5):
    p.produce('pymtls', value=b'm%d' % i)
assert p.flush(30) == 0, 'unflushed'
c = Consumer(dict(tls, **{'group.id': 'pymtls-group', 'auto.offset.reset': 'earliest'}))
c.subscribe(['pymtls'])
got = []
while len(got) < 5:
    m = c.poll(30)
    assert m is not None, 'no record'
    assert m.error() is None, m.error()
    got.append(m.value())
c.close()
assert got == [b'm%d' % i for i in range(5)], got
# Without a certificate: the client's error callback reports the refused
# handshake (waited for by polling, bounded); a metadata request never
# succeeds.
errors = []
anon = Producer({'bootstrap.servers': addr, 'security.protocol': 'SSL', 'ssl.ca.location': ca,
                 'error_cb': lambda err: errors.append(err)})
deadline = time.monotonic() + 60
while not errors and time.monotonic() < deadline:
    anon.poll(0.05)
assert errors, 'no error for a client without a certificate'
try:
    anon.list_topics(timeout=1)
    raise SystemExit('a client without a certificate got in')
except KafkaException:
    pass
print('ok')
`

// TestPythonMTLS: the Python client authenticates with a client
// certificate (ssl.client.auth=required), produces and consumes; a client
// without one is refused.
func TestPythonMTLS(t *testing.T) {
	run := python(t)
	sb := serveSecure(t, Options{}, TLSOptions{ClientAuth: "required"}, nil)
	cert, key := sb.pki.Issue(t, "client", 20, "py-client", false)
	run(pythonMTLS, sb.addrs[ProtocolSSL], sb.pki.CAFile, cert, key)
}
