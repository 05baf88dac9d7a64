package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// header is a request's header (v1, or v2 with tagged fields for flexible
// requests).
type header struct {
	key, version int16
	correlation  int32
	clientID     string
	host         string    // the peer's address, as Kafka shows a member's host
	listener     *Listener // the one the connection came through (nil in the fuzz test)
	sess         *session  // the connection's security state (nil in the fuzz test)
}

// errMalformed closes the connection: a request that does not parse.
var errMalformed = errors.New("broker: malformed request")

// parseHeader reads the request header at the start of b and returns the
// body after it. flexible says whether the header carries tagged fields,
// which the request type at its version decides.
func parseHeader(b []byte) (header, kmsg.Request, []byte, error) {
	var h header
	if len(b) < 10 {
		return h, nil, nil, fmt.Errorf("%w: a %d-byte request has no header", errMalformed, len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(b[4:]))
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n >= 0 {
		if int(n) > len(b) {
			return h, nil, nil, fmt.Errorf("%w: the client id runs past the frame", errMalformed)
		}
		h.clientID, b = string(b[:n]), b[n:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, nil, nil, fmt.Errorf("%w: unknown API key %d", errMalformed, h.key)
	}
	if h.version < 0 {
		return h, nil, nil, fmt.Errorf("%w: version %d", errMalformed, h.version)
	}
	req.SetVersion(h.version)
	if h.version <= req.MaxVersion() && req.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return h, nil, nil, err
		}
	}
	return h, req, b, nil
}

// skipTags skips a header's tagged fields: a count, then each tag's key,
// size and bytes, all unsigned varints.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tagged fields", errMalformed)
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: bad tag", errMalformed)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: a tag runs past the frame", errMalformed)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// Pipelining bounds: a connection reads ahead at most maxInFlight requests
// (Kafka clients send up to 5 at once), and at most maxQueuedBytes of
// frames while one is being answered (a larger single frame, up to
// socket.request.max.bytes, is read only when none is queued). A client
// that stops reading its responses stops the reading of its requests: the
// memory a connection holds is bounded.
const (
	maxInFlight    = 8
	maxQueuedBytes = 16 << 20
)

// pending is a request read and waiting its turn; err is a frame that does
// not parse, which closes the connection once the requests before it are
// answered.
type pending struct {
	h     header
	req   kmsg.Request
	body  []byte
	size  int
	start time.Time
	err   error
	buf   *[]byte // the frame's buffer, back to framePool once answered
	// raw is a bare SASL token (after SaslHandshake v0), not a request.
	raw bool
	// done, if set, is closed once the request is answered: the reader
	// waits for a SASL request's answer before it reads on.
	done chan struct{}
}

// framePools keep request frames' buffers for reuse, one pool per size
// class (powers of four from 64 KiB to 64 MiB; smaller frames take the
// smallest): a decoded request's bytes (a produce's records) alias its
// frame, so a buffer is put back only once its request is answered.
var framePools [frameClasses]sync.Pool

const (
	minFrameClass  = firstFrameChunk
	frameClasses   = 6
	maxPooledFrame = minFrameClass << (2 * (frameClasses - 1)) // 64 MiB
)

// frameClass returns the class of a frame of n bytes (its capacity is
// minFrameClass << 2·class), or -1 past the largest.
func frameClass(n int) int {
	for c := range frameClasses {
		if n <= minFrameClass<<(2*c) {
			return c
		}
	}
	return -1
}

// getFrame returns a buffer of at least n bytes: pooled, or of its class's
// capacity (the next request of about the same size reuses it), or of n
// bytes past the largest class.
func getFrame(n int) *[]byte {
	c := frameClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := framePools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, n, minFrameClass<<(2*c))
	return &b
}

// pooledFrame returns a pooled buffer of at least n bytes, or nil: the
// memory is held already, so a frame read into it grows without copies.
func pooledFrame(n int) *[]byte {
	if c := frameClass(n); c >= 0 {
		if b, ok := framePools[c].Get().(*[]byte); ok {
			return b
		}
	}
	return nil
}

func putFrame(b *[]byte) {
	if b == nil {
		return
	}
	if c := frameClass(cap(*b)); c >= 0 && cap(*b) == minFrameClass<<(2*c) {
		framePools[c].Put(b)
	}
}

// firstFrameChunk is the memory a frame's body is first read into: a
// larger one grows four-fold at a time as its bytes arrive.
const firstFrameChunk = 64 << 10

// readFrame reads an n-byte frame body, reserving its memory from the
// broker's request budget (queued.max.request.bytes) before each
// allocation, as its bytes arrive: a frame announced large and sent
// slowly holds at most four times what it sent, never what it announced.
// The buffer's length is the memory reserved, released once answered; ctx
// ending (the broker closing) ends a wait for memory.
func (cn *connection) readFrame(r io.Reader, n int) (*[]byte, error) {
	b, ctx, log := cn.b, cn.ctx, cn.log
	// A pooled buffer that holds the whole frame takes it as it grows (its
	// memory reserved step by step all the same): no copies.
	buf := pooledFrame(n)
	have := 0
	for size := min(n, firstFrameChunk); ; size = min(n, size*4) {
		ok := b.reqMem.acquire(ctx, int64(size-have), func() {
			b.metrics.memoryWaits.Inc()
			log.Warn("request memory (queued.max.request.bytes) is full: reading paused", "limit", b.opts.QueuedMaxRequestBytes)
		})
		if !ok {
			if buf != nil {
				b.reqMem.release(int64(have))
				putFrame(buf)
			}
			return nil, ctx.Err()
		}
		if buf == nil || cap(*buf) < size {
			next := getFrame(size)
			if buf != nil {
				copy((*next)[:have], (*buf)[:have])
				putFrame(buf)
			}
			buf = next
		}
		*buf = (*buf)[:size]
		read, err := io.ReadFull(r, (*buf)[have:size])
		if err != nil {
			b.reqMem.release(int64(size))
			putFrame(buf)
			return nil, err
		}
		if have += read; have == n {
			return buf, nil
		}
	}
}

// readAhead counts the requests read and not yet answered, and their bytes.
type readAhead struct {
	mu    sync.Mutex // guards n and bytes (cond waits on it)
	cond  sync.Cond
	n     int
	bytes int
}

// acquire waits for room for a frame of size bytes.
func (q *readAhead) acquire(size int) {
	q.mu.Lock()
	for q.n >= maxInFlight || q.n > 0 && q.bytes+size > maxQueuedBytes {
		q.cond.Wait()
	}
	q.n++
	q.bytes += size
	q.mu.Unlock()
}

func (q *readAhead) release(size int) {
	q.mu.Lock()
	q.n--
	q.bytes -= size
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *readAhead) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n > 0
}

// A connection is one client's connection as the broker serves it
// (Kafka's socket server processor): its reader, its answerer, its
// session and its context.
type connection struct {
	b    *Broker
	c    net.Conn
	l    *Listener
	sess *session
	log  *slog.Logger
	// ctx ends when the client goes (the reader ends) or the broker
	// closes: a long poll or a remote read on its behalf stops then.
	ctx   context.Context
	queue chan pending // read, to be answered in order
	ahead *readAhead
}

// serveConn serves one connection: this goroutine reads frames (bounded
// read-ahead), another answers them one at a time in request order. A
// frame larger than MaxRequestBytes, or a request that does not parse,
// closes this connection only, with a log line, after the requests before
// it are answered.
func serveConn(b *Broker, c net.Conn, l *Listener) {
	defer c.Close()
	log := b.opts.Logger.With("remote", c.RemoteAddr().String())
	if tc, ok := c.(*tls.Conn); ok {
		// The handshake first: the client certificate names the principal.
		_ = tc.SetDeadline(time.Now().Add(b.opts.IdleTimeout))
		if err := tc.Handshake(); err != nil {
			log.Debug("TLS handshake failed", "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
	}
	sess, err := b.authn.newSession(c, l)
	if err != nil {
		log.Warn("refusing a TLS client", "err", err)
		b.metrics.closedAuth.Inc()
		return
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	cn := &connection{b: b, c: c, l: l, sess: sess, log: log, ctx: ctx, queue: make(chan pending, maxInFlight), ahead: &readAhead{}}
	cn.ahead.cond.L = &cn.ahead.mu
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		cn.answer()
	}()
	cn.read()
	cancel()
	close(cn.queue)
	<-answered
}

// read reads frames until the connection ends, is idle for
// connections.max.idle.ms (no request read or in flight), or sends one
// that does not parse.
func (cn *connection) read() {
	b, c, l, sess, queue, ahead, log := cn.b, cn.c, cn.l, cn.sess, cn.queue, cn.ahead, cn.log
	r := bufio.NewReaderSize(c, 8<<10)
	host := clientHost(c.RemoteAddr())
	var size [4]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(b.opts.IdleTimeout))
		if n, err := io.ReadFull(r, size[:]); err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && n == 0 && ahead.busy():
				continue // a long request in flight: not idle
			case errors.As(err, &ne) && ne.Timeout():
				b.metrics.closedIdle.Inc()
				log.Debug("closing an idle connection", "idle", b.opts.IdleTimeout)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				log.Debug("connection closed", "err", err)
			}
			return
		}
		start := time.Now()
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 0 || n > b.opts.MaxRequestBytes {
			ahead.acquire(0)
			queue <- pending{err: fmt.Errorf("%w: a %d-byte frame is larger than socket.request.max.bytes (%d)",
				errMalformed, n, b.opts.MaxRequestBytes)}
			return
		}
		ahead.acquire(int(n))
		buf, err := cn.readFrame(r, int(n))
		if err != nil {
			ahead.release(int(n))
			log.Debug("connection closed mid-frame", "err", err)
			return
		}
		frame := (*buf)[:n]
		if sess.raw {
			// A bare SASL token: answered before anything else is read.
			done := make(chan struct{})
			queue <- pending{h: header{host: host, listener: l, sess: sess}, body: frame, size: int(n), start: start,
				buf: buf, raw: true, done: done}
			<-done
			continue
		}
		h, req, body, err := parseHeader(frame)
		h.host, h.listener, h.sess = host, l, sess
		var done chan struct{}
		if a := apiFor(h.key); err == nil && a != nil && a.sasl {
			done = make(chan struct{})
		}
		queue <- pending{h: h, req: req, body: body, size: int(n), start: start, err: err, buf: buf, done: done}
		if err != nil {
			return
		}
		if done != nil {
			<-done // the session (raw) as the answer left it
		}
	}
}

// answer handles the requests in order and writes their responses. After
// a failure it only drains the queue (closing the connection ends the
// reader).
func (cn *connection) answer() {
	failed := false
	for p := range cn.queue {
		if !failed && !cn.answerOne(p) {
			failed = true
			_ = cn.c.Close()
		}
		if p.done != nil {
			close(p.done)
		}
		cn.ahead.release(p.size)
		if p.buf != nil {
			cn.b.reqMem.release(int64(len(*p.buf)))
		}
		putFrame(p.buf) // nothing refers to the frame once it is answered
	}
}

// recoveredPanics counts the requests whose handler panicked (a bug):
// the broker package's TestMain fails if any did.
var recoveredPanics atomic.Int64

// handleRecovering is handle, with a panic of the handler (a bug in
// seglog, whatever the client sent) taken as an error that closes the
// connection, logged with its stack, instead of the broker's end.
func (b *Broker) handleRecovering(ctx context.Context, h header, req kmsg.Request, body []byte, log *slog.Logger) (resp kmsg.Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			recoveredPanics.Add(1)
			log.Error("a request's handler failed: closing the connection", "api", kmsg.NameForKey(h.key), "version", h.version,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%s v%d: the handler failed: %v", kmsg.NameForKey(h.key), h.version, v)
		}
	}()
	return b.handle(ctx, h, req, body)
}

// answerOne handles one request and writes its response; false closes the
// connection.
func (cn *connection) answerOne(p pending) bool {
	b, c, log := cn.b, cn.c, cn.log
	if p.err != nil {
		log.Warn("closing the connection", "err", p.err)
		b.metrics.closedBad.Inc()
		return false
	}
	if p.raw {
		out, err := b.authn.saslRawToken(p.h, p.body)
		if err == nil {
			_ = c.SetWriteDeadline(time.Now().Add(b.opts.IdleTimeout))
			_, err = c.Write(out)
		}
		return err == nil
	}
	b.limits.waitMuted(p.h.sess)
	begin := time.Now()
	resp, err := b.handleRecovering(cn.ctx, p.h, p.req, p.body, log)
	handled := time.Now()
	if errors.Is(err, errUnauthenticated) {
		log.Info("closing the connection", "api", kmsg.NameForKey(p.h.key), "err", err)
		b.metrics.closedAuth.Inc()
		return false
	}
	if err != nil {
		log.Warn("closing the connection", "api", kmsg.NameForKey(p.h.key), "version", p.h.version, "err", err)
		b.metrics.closedBad.Inc()
		return false
	}
	_ = c.SetWriteDeadline(time.Now().Add(b.opts.IdleTimeout))
	if _, err := writeReply(b.metrics, c, p.h, resp, 4+p.size); err != nil {
		if errors.Is(err, errResponseTooLarge) {
			log.Warn("closing the connection", "err", err)
		} else {
			log.Debug("writing a response", "err", err)
		}
		return false
	}
	b.metrics.forAPI(p.h.key).timed(p.start, begin, handled, time.Now())
	if p.h.sess != nil && p.h.sess.closeAfter {
		log.Info("closing the connection after a failed SASL exchange")
		b.metrics.closedAuth.Inc()
		return false
	}
	return true
}

// errResponseTooLarge is a response whose size does not fit a frame's
// int32 length: the connection is closed rather than a wrapped length
// sent (fetch.max.bytes and the request's own limits keep any response
// far below it).
var errResponseTooLarge = errors.New("broker: the response is larger than a frame can say")

// writeReply counts a response and writes it (nothing for acks=0); a
// fetch's record bytes go from their segment files (sendfile where the
// platform allows). in is the request's size, for the collectors.
func writeReply(m *metrics, w io.Writer, h header, resp kmsg.Response, in int) (int, error) {
	if resp == nil {
		m.answered(h, nil, in, 0)
		return 0, nil
	}
	if fr, ok := resp.(*fetchReply); ok {
		defer fr.close()
		chunks, size := fr.encode(h)
		if size-4 > math.MaxInt32 {
			return 0, fmt.Errorf("%w: %d bytes", errResponseTooLarge, size-4)
		}
		m.answered(h, fr.FetchResponse, in, size)
		fr.countOut(m)
		return size, fr.writeTo(w, chunks)
	}
	m.knownCodes(resp)
	buf := encodeResponse(h, resp)
	if len(buf)-4 > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d bytes", errResponseTooLarge, len(buf)-4)
	}
	m.answered(h, resp, in, len(buf))
	_, err := w.Write(buf)
	return len(buf), err
}

// encodeResponse frames a response: its size, the correlation id, tagged
// fields for a flexible response (never for ApiVersions, whose response
// header is always v0), and the body.
func encodeResponse(h header, resp kmsg.Response) []byte {
	buf := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(buf[4:], uint32(h.correlation))
	if resp.IsFlexible() && h.key != 18 {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// clientIP is the peer's IP address, as ACL hosts and IP quotas name it.
func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}

// clientHost is a connection's peer as Kafka shows a member's host.
func clientHost(a net.Addr) string {
	if _, ok := a.(*net.TCPAddr); ok {
		return "/" + clientIP(a)
	}
	return a.String()
}
