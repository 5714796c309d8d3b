package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash returns "sha256:<hex>" of the contract's canonical form: the JSON of
// the typed, defaulted contract with object keys sorted and no insignificant
// whitespace. The same contract written in YAML or JSON, with keys in any
// order, with sizes as "1MiB" or 1048576, or with defaults spelled out or
// left out, has the same hash.
func (c *Contract) Hash() string {
	sum := sha256.Sum256(c.canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (c *Contract) canonical() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		// Every field of Contract marshals; this cannot happen.
		panic("contracts: marshal contract: " + err.Error())
	}
	// Struct fields marshal in declaration order; a round trip through
	// plain values sorts every object's keys.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic("contracts: canonicalise contract: " + err.Error())
	}
	out, err := json.Marshal(v)
	if err != nil {
		panic("contracts: canonicalise contract: " + err.Error())
	}
	return out
}
