package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MinStrongLen is the shortest secret value, in bytes, whose encodings are
// redacted too. Shorter values are redacted only literally; see [Redactor.Weak].
const MinStrongLen = 8

// Redactor replaces secret values and their encodings with "[REDACTED:NAME]".
// It is immutable after [New] and safe for concurrent use.
type Redactor struct {
	root   [256]int32 // child of the trie root for each byte; 0 means none
	nodes  []node     // nodes[0] is the root
	repl   [][]byte   // replacement for each secret index
	maxLen int        // longest pattern
	pfx    int        // bytes hashed into filter: min(4, shortest pattern)
	filter [filterWords]uint64
	weak   []string
}

type node struct {
	edges []edge
	term  int32 // index into repl of the pattern ending here, or -1
}

type edge struct {
	b    byte
	next int32
}

const (
	filterBits  = 16
	filterWords = 1 << filterBits / 64
)

// New builds a Redactor for secrets. Secrets with an empty value are ignored.
// When two secrets have a pattern in common the earlier one's name is used.
// A nil or empty list gives a Redactor that changes nothing.
func New(secrets []Secret) *Redactor {
	r := &Redactor{nodes: []node{{term: -1}}}
	minLen := 0
	for _, s := range secrets {
		if s.Value == "" {
			continue
		}
		id := int32(len(r.repl))
		r.repl = append(r.repl, []byte("[REDACTED:"+cleanName(s.Name)+"]"))
		if len(strings.TrimSpace(s.Value)) < MinStrongLen {
			r.weak = append(r.weak, s.Name)
		}
		ps := patterns(s.Value)
		if t := strings.TrimSpace(s.Value); t != s.Value && t != "" {
			// A value read from a file often ends in a newline that the
			// command's output will not contain.
			ps = append(ps, patterns(t)...)
		}
		for _, p := range ps {
			r.insert(p, id)
			if minLen == 0 || len(p) < minLen {
				minLen = len(p)
			}
			r.maxLen = max(r.maxLen, len(p))
		}
	}
	r.pfx = min(4, minLen)
	r.buildFilter()
	return r
}

// Weak returns the names of secrets shorter than [MinStrongLen], which are
// redacted only literally, in the order given to New.
func (r *Redactor) Weak() []string { return slices.Clone(r.weak) }

// Holdback returns the most bytes a [Redactor.Writer] keeps back between
// writes: one less than the longest pattern.
func (r *Redactor) Holdback() int {
	if r == nil {
		return 0
	}
	return max(0, r.maxLen-1)
}

// cleanName keeps a secret's name safe to embed in JSON and log text.
func cleanName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "SECRET"
	}
	return string(b)
}

// patterns lists the byte strings that reveal v, without duplicates.
func patterns(v string) []string {
	var ps []string
	add := func(p string) {
		if p != "" && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	add(v)
	// Escaped forms: JSON (as encoding/json and log/slog write it) and Go
	// quoting (slog's text handler, %q). These matter for short values too.
	add(jsonInner(v, true))
	add(jsonInner(v, false))
	add(strings.TrimSuffix(strings.TrimPrefix(strconv.Quote(v), `"`), `"`))
	if len(v) < MinStrongLen {
		return ps
	}
	add(string(reverseBytes([]byte(v))))
	if utf8.ValidString(v) {
		rs := []rune(v)
		slices.Reverse(rs)
		add(string(rs))
	}
	add(hex.EncodeToString([]byte(v)))
	add(strings.ToUpper(hex.EncodeToString([]byte(v))))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(v)))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for off := range 3 {
			add(base64Inner(enc, []byte(v), off))
		}
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	add(percentAll(v, "%02X"))
	add(percentAll(v, "%02x"))
	return ps
}

func jsonInner(v string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	s := strings.TrimSuffix(b.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(s, `"`), `"`)
}

func reverseBytes(b []byte) []byte {
	slices.Reverse(b)
	return b
}

// base64Inner returns the base64 characters that depend only on v when v is
// preceded by off bytes and followed by unknown bytes in a longer stream.
func base64Inner(enc *base64.Encoding, v []byte, off int) string {
	buf := make([]byte, off+len(v)+3)
	copy(buf[off:], v)
	s := enc.EncodeToString(buf)
	first := (8*off + 5) / 6         // first character whose bits all lie in v
	last := (8*(off+len(v)) - 6) / 6 // last such character
	if last < first {
		return ""
	}
	return s[first : last+1]
}

func percentAll(v, format string) string {
	var b strings.Builder
	const digits = "0123456789ABCDEF"
	lower := format == "%02x"
	for i := 0; i < len(v); i++ {
		c := v[i]
		b.WriteByte('%')
		hi, lo := digits[c>>4], digits[c&15]
		if lower {
			hi, lo = toLower(hi), toLower(lo)
		}
		b.WriteByte(hi)
		b.WriteByte(lo)
	}
	return b.String()
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (r *Redactor) insert(p string, id int32) {
	cur := r.root[p[0]]
	if cur == 0 {
		cur = r.newNode()
		r.root[p[0]] = cur
	}
	for i := 1; i < len(p); i++ {
		next := r.nodes[cur].find(p[i])
		if next == 0 {
			next = r.newNode()
			r.nodes[cur].edges = append(r.nodes[cur].edges, edge{b: p[i], next: next})
		}
		cur = next
	}
	if r.nodes[cur].term < 0 {
		r.nodes[cur].term = id
	}
}

func (r *Redactor) newNode() int32 {
	r.nodes = append(r.nodes, node{term: -1})
	return int32(len(r.nodes) - 1)
}

func (n *node) find(b byte) int32 {
	for _, e := range n.edges {
		if e.b == b {
			return e.next
		}
	}
	return 0
}

// buildFilter records the first r.pfx bytes of every pattern in a bitset,
// so that most positions of ordinary text are skipped with one lookup.
func (r *Redactor) buildFilter() {
	if r.pfx == 0 {
		return
	}
	var walk func(n int32, key uint32, depth int)
	walk = func(n int32, key uint32, depth int) {
		if depth == r.pfx {
			h := filterHash(key)
			r.filter[h/64] |= 1 << (h % 64)
			return
		}
		for _, e := range r.nodes[n].edges {
			walk(e.next, key<<8|uint32(e.b), depth+1)
		}
	}
	for b, n := range r.root {
		if n != 0 {
			walk(n, uint32(b), 1)
		}
	}
}

func filterHash(key uint32) uint32 { return (key * 0x9E3779B1) >> (32 - filterBits) }

// mayMatch reports whether a pattern may start at b[0]. It needs
// len(b) >= r.pfx.
func (r *Redactor) mayMatch(b []byte) bool {
	var key uint32
	if r.pfx == 4 {
		key = binary.BigEndian.Uint32(b)
	} else {
		for i := range r.pfx {
			key = key<<8 | uint32(b[i])
		}
	}
	h := filterHash(key)
	return r.filter[h/64]&(1<<(h%64)) != 0
}

// matchAt returns the length and secret index of the longest pattern that is
// a prefix of b, or 0 and -1.
func (r *Redactor) matchAt(b []byte) (int, int32) {
	cur := r.root[b[0]]
	best, id := 0, int32(-1)
	for j := 1; cur != 0; j++ {
		nd := &r.nodes[cur]
		if nd.term >= 0 {
			best, id = j, nd.term
		}
		if j >= len(b) {
			break
		}
		cur = nd.find(b[j])
	}
	return best, id
}

// redact appends the redaction of src to dst. Every byte covered by any
// pattern match is removed: each maximal run of overlapping matches becomes
// one replacement, named after the secret of the run's first (longest)
// match. Replacing only the leftmost match would let a crafted prefix that
// overlaps the start of a secret hide the rest of it from the scan.
//
// covered is how many leading bytes of src an earlier call already replaced
// (they are not emitted again). If final is false, redact evaluates only the
// positions with a full window of r.maxLen bytes after them and returns how
// many bytes of src it consumed and how many of the unconsumed bytes are
// already covered; the caller keeps the unconsumed rest (fewer than r.maxLen
// bytes) for the next call.
func (r *Redactor) redact(dst, src []byte, final bool, covered int) (out []byte, consumed, carry int) {
	if len(r.repl) == 0 {
		return append(dst, src...), len(src), 0
	}
	stop := len(src)
	if !final {
		stop = max(0, len(src)-(r.maxLen-1))
	}
	cov := covered     // end of the current run of covered bytes
	emitted := covered // bytes of src already represented in dst
	for i := 0; i < stop; i++ {
		if i+r.pfx <= len(src) {
			if !r.mayMatch(src[i:]) {
				continue
			}
		} else if r.root[src[i]] == 0 {
			continue
		}
		n, id := r.matchAt(src[i:])
		switch {
		case n == 0:
		case i < cov: // overlaps the current run: extend it
			cov = max(cov, i+n)
			emitted = cov
		default: // a new run
			dst = append(dst, src[emitted:i]...)
			dst = append(dst, r.repl[id]...)
			cov = i + n
			emitted = cov
		}
	}
	if emitted < stop {
		dst = append(dst, src[emitted:stop]...)
	}
	return dst, stop, max(0, cov-stop)
}

// String returns s with every secret pattern replaced.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.repl) == 0 {
		return s
	}
	out, _, _ := r.redact(nil, []byte(s), true, 0)
	return string(out)
}

// Bytes returns b with every secret pattern replaced, in a new slice. b is
// not modified.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(r.repl) == 0 {
		return slices.Clone(b)
	}
	out, _, _ := r.redact(make([]byte, 0, len(b)), b, true, 0)
	return out
}
