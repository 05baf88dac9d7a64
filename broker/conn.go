package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// header is a request's header (v1, or v2 with tagged fields for flexible
// requests).
type header struct {
	key, version int16
	correlation  int32
	clientID     string
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

// serveConn reads requests one after another and answers each in order.
// A frame larger than MaxRequestBytes, or a request that does not parse,
// closes this connection only, with a log line.
func (b *Broker) serveConn(c net.Conn) {
	defer c.Close()
	log := b.opts.Logger.With("remote", c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	var size [4]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(b.opts.IdleTimeout))
		if _, err := io.ReadFull(r, size[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				b.metrics.closedIdle.Inc()
				log.Debug("closing an idle connection", "idle", b.opts.IdleTimeout)
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("connection closed", "err", err)
			}
			return
		}
		start := time.Now()
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 0 || n > b.opts.MaxRequestBytes {
			log.Warn("closing the connection: a request frame larger than socket.request.max.bytes", "bytes", n,
				"limit", b.opts.MaxRequestBytes)
			b.metrics.closedBad.Inc()
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			log.Debug("connection closed mid-frame", "err", err)
			return
		}
		h, req, body, err := parseHeader(frame)
		if err != nil {
			log.Warn("closing the connection", "err", err)
			b.metrics.closedBad.Inc()
			return
		}
		resp, err := b.handle(h, req, body)
		if err != nil {
			log.Warn("closing the connection", "api", kmsg.NameForKey(h.key), "version", h.version, "err", err)
			b.metrics.closedBad.Inc()
			return
		}
		var buf []byte
		if resp != nil { // acks=0: no response
			buf = encodeResponse(h, resp)
		}
		b.metrics.answered(h.key, resp, 4+len(frame), len(buf))
		if buf != nil {
			if _, err := c.Write(buf); err != nil {
				log.Debug("writing a response", "err", err)
				return
			}
		}
		b.metrics.latency.WithLabelValues(kmsg.NameForKey(h.key)).Observe(time.Since(start).Seconds())
	}
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
