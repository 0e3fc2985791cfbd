package gateway

import (
	"bytes"
	"slices"
	"sync"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// When the rules change (docs/fingerprint.md#when-the-rules-change, case C22): a record keeps the
// fingerprint rules its claim was fingerprinted under (record.Record.Rules). A request whose
// fingerprint differs from a record's that was made under other rules than its route's now (a
// reload or an upgrade changed them) is fingerprinted again under the record's rules: the same
// fingerprint there is the same effect (a replay, or a duplicate in flight); another is a conflict
// that names the fields that differ under the record's rules and that the route's rules read
// too. When none does, or the record kept no document to compare, the gateway cannot tell, and
// refuses with fingerprint-rules-changed, naming no field. Records written before the rules were
// kept are compared by fingerprint alone, as before.

// priorRules is what sameEffect found of a request under the rules of the record it met.
type priorRules struct {
	c   *canonical.Canonicalizer // the record's rules
	doc []byte                   // the request's document under them; nil when it has none
}

// sameEffect reports whether x is the effect prev's key was claimed for: its fingerprint is
// prev's, or prev was fingerprinted under other rules than x's route has now and x's fingerprint
// under those rules is prev's. In the second case x.prior keeps what conflict needs.
func (x *Exchange) sameEffect(prev *record.Record) bool {
	x.prior = nil // a duplicate that waited claims again, and may meet another record
	if prev.EffectFingerprint == x.fp {
		return true
	}
	if prev.Rules == nil || bytes.Equal(prev.Rules, x.rt.Fingerprint.Rules()) {
		return false
	}
	x.prior = &priorRules{}
	c, err := x.g.ruleSets.compile(prev.Rules)
	if err != nil {
		x.logger().Warn("a record's fingerprint rules do not compile: its retries cannot be compared", "err", err)
		return false
	}
	x.prior.c = c
	doc, err := gatedDocument(x.r.Context(), x.g.parses, c, x.req)
	if err != nil { // the request is not one the record's rules can read: it is not that effect
		return false
	}
	x.prior.doc = doc
	return canonical.Fingerprint(doc) == prev.EffectFingerprint
}

// priorConflict returns the fields a request that sameEffect found to differ from prev, under
// rules other than its route's, differs in: those prev's rules find differing that the route's
// rules read too, at most limit. None means the gateway cannot tell which field changed.
func (x *Exchange) priorConflict(prev *record.Record, limit int) []string {
	if x.prior.c == nil || x.prior.doc == nil || prev.Document == nil {
		return nil
	}
	fields := x.prior.c.DifferingFields(prev.Document, x.prior.doc, 0)
	fields = slices.DeleteFunc(fields, func(f string) bool { return !x.rt.Fingerprint.ReadsField(f) })
	if len(fields) > limit {
		fields = append(fields[:limit-1], canonical.TruncatedMarker)
	}
	return fields
}

// ruleSets compiles the rules of records, keeping up to maxRuleSets of them: a routes file that
// changes its rules keeps few versions alive at once.
type ruleSets struct {
	mu  sync.Mutex
	set map[string]*canonical.Canonicalizer
}

// maxRuleSets bounds the compiled rule sets a gateway keeps; others are compiled on each use.
const maxRuleSets = 256

func (s *ruleSets) compile(text []byte) (*canonical.Canonicalizer, error) {
	s.mu.Lock()
	c := s.set[string(text)]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := canonical.CompileRules(text)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = make(map[string]*canonical.Canonicalizer)
	}
	if len(s.set) < maxRuleSets {
		s.set[string(text)] = c
	}
	return c, nil
}
