package egress

import (
	"errors"
	"fmt"
	"io"
)

// maxHelloBytes bounds what the proxy reads while looking for a TLS
// ClientHello: real ones, post-quantum key shares included, are a few KiB.
const maxHelloBytes = 32 << 10

const (
	recordTypeHandshake  = 22
	handshakeClientHello = 1
	maxRecordPayload     = 1<<14 + 256 // TLSPlaintext limit with slack for old stacks

	extServerName   = 0x0000
	extECH          = 0xfe0d // encrypted_client_hello (RFC 9849)
	extESNI         = 0xffce // the draft encrypted_server_name
	sniHostNameType = 0
)

// clientHello is what the proxy needs from a TLS ClientHello.
type clientHello struct {
	ServerName string // empty when there is no server_name extension
	ECH        bool   // the hello hides its real name (ECH or ESNI)
}

// readClientHello reads TLS records from r until it holds the whole first
// handshake message, which must be a ClientHello. It returns every byte
// read (to be forwarded unchanged) and the parsed hello.
func readClientHello(r io.Reader) (raw []byte, hello clientHello, err error) {
	var msg []byte // the handshake message, reassembled from records
	var hdr [5]byte
	for {
		k, err := io.ReadFull(r, hdr[:])
		raw = append(raw, hdr[:k]...)
		if err != nil {
			return raw, hello, fmt.Errorf("read TLS record: %w", err)
		}
		if hdr[0] != recordTypeHandshake {
			return raw, hello, errors.New("not a TLS handshake")
		}
		if hdr[1] != 3 {
			return raw, hello, errors.New("not a TLS record (bad version)")
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > maxRecordPayload {
			return raw, hello, fmt.Errorf("bad TLS record length %d", n)
		}
		if len(raw)+n > maxHelloBytes {
			return raw, hello, errors.New("TLS ClientHello too large")
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if k, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start+k], hello, fmt.Errorf("read TLS record: %w", err)
		}
		msg = append(msg, raw[start:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeClientHello {
			return raw, hello, errors.New("first TLS handshake message is not a ClientHello")
		}
		mlen := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if mlen > maxHelloBytes {
			return raw, hello, errors.New("TLS ClientHello too large")
		}
		if len(msg) >= 4+mlen {
			hello, err = parseClientHello(msg[4 : 4+mlen])
			return raw, hello, err
		}
	}
}

// parseClientHello parses a ClientHello body (after the 4-byte handshake
// header). It is strict where leniency could let the proxy and the server
// read different names: exactly one host_name in server_name, no
// duplicate extensions, every length consumed exactly.
func parseClientHello(b []byte) (clientHello, error) {
	var h clientHello
	s := cursor(b)
	if !s.skip(2 + 32) { // legacy_version, random
		return h, errors.New("ClientHello too short")
	}
	if sid, ok := s.vec(1); !ok || len(sid) > 32 {
		return h, errors.New("bad ClientHello session id")
	}
	if cs, ok := s.vec(2); !ok || len(cs) < 2 || len(cs)%2 != 0 {
		return h, errors.New("bad ClientHello cipher suites")
	}
	if cm, ok := s.vec(1); !ok || len(cm) < 1 {
		return h, errors.New("bad ClientHello compression methods")
	}
	if len(s) == 0 {
		return h, nil // no extensions at all (SSLv3-era hello): no name
	}
	exts, ok := s.vec(2)
	if !ok || len(s) != 0 {
		return h, errors.New("bad ClientHello extensions")
	}
	seen := map[uint16]bool{}
	for len(exts) > 0 {
		typ, ok := exts.u16()
		if !ok {
			return h, errors.New("bad ClientHello extension")
		}
		data, ok := exts.vec(2)
		if !ok {
			return h, errors.New("bad ClientHello extension")
		}
		if seen[typ] {
			return h, fmt.Errorf("duplicate ClientHello extension %d", typ)
		}
		seen[typ] = true
		switch typ {
		case extECH, extESNI:
			h.ECH = true
		case extServerName:
			name, err := parseServerName(data)
			if err != nil {
				return h, err
			}
			h.ServerName = name
		}
	}
	return h, nil
}

// parseServerName reads the server_name extension (RFC 6066 §3).
func parseServerName(data cursor) (string, error) {
	list, ok := data.vec(2)
	if !ok || len(data) != 0 || len(list) == 0 {
		return "", errors.New("bad server_name extension")
	}
	var name string
	for len(list) > 0 {
		typ, ok := list.u8()
		if !ok {
			return "", errors.New("bad server_name extension")
		}
		n, ok := list.vec(2)
		if !ok || len(n) == 0 {
			return "", errors.New("bad server_name extension")
		}
		if typ != sniHostNameType {
			return "", fmt.Errorf("server_name of unknown type %d", typ)
		}
		if name != "" {
			return "", errors.New("server_name holds more than one host name")
		}
		name = string(n)
	}
	return name, nil
}

// cursor reads big-endian TLS fields off a byte slice.
type cursor []byte

func (c *cursor) skip(n int) bool {
	if len(*c) < n {
		return false
	}
	*c = (*c)[n:]
	return true
}

func (c *cursor) u8() (byte, bool) {
	if len(*c) < 1 {
		return 0, false
	}
	v := (*c)[0]
	*c = (*c)[1:]
	return v, true
}

func (c *cursor) u16() (uint16, bool) {
	if len(*c) < 2 {
		return 0, false
	}
	v := uint16((*c)[0])<<8 | uint16((*c)[1])
	*c = (*c)[2:]
	return v, true
}

// vec reads a vector with a lenBytes-byte length prefix.
func (c *cursor) vec(lenBytes int) (cursor, bool) {
	if len(*c) < lenBytes {
		return nil, false
	}
	n := 0
	for i := 0; i < lenBytes; i++ {
		n = n<<8 | int((*c)[i])
	}
	if len(*c) < lenBytes+n {
		return nil, false
	}
	v := (*c)[lenBytes : lenBytes+n]
	*c = (*c)[lenBytes+n:]
	return v, true
}

// sniMatches reports whether a ClientHello's server name names host (a
// canonical lower-case name): ASCII case is ignored and one trailing dot
// dropped, nothing else.
func sniMatches(sni, host string) bool {
	if len(sni) > 0 && sni[len(sni)-1] == '.' {
		sni = sni[:len(sni)-1]
	}
	if len(sni) != len(host) {
		return false
	}
	for i := 0; i < len(sni); i++ {
		c := sni[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != host[i] {
			return false
		}
	}
	return true
}
