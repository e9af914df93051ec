package template

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Wildcard stands in a template for a position whose tokens varied.
const Wildcard = "<*>"

// Version numbers the rules that turn a message into tokens (Tokenize,
// mask) and the ID scheme. Templates persisted under another version were
// mined from other tokens: a message tokenized now may no longer match
// them, so a caller that persists templates re-mines when it changes.
const Version = 1

// salt starts every hashed ID.
var salt = []byte("redrive-template/1\n")

// Template is a mined template.
type Template struct {
	// Group is the group given to Add (queue and error type).
	Group string
	// ID identifies the template for good: 16 hex characters of a hash of
	// the group and the first message's tokens (made unique within the
	// group), unchanged when the template generalizes.
	ID string
	// Tokens are the template's tokens, Wildcard where messages varied.
	Tokens []string
	// Count is how many messages joined the template; it does not steer
	// the mining (a restored miner behaves alike whatever the counts).
	Count int64
	// Seq is the template's creation order within its group, from 1; 0 for
	// the overflow template.
	Seq int64
	// Path is the tree descent the template was filed under (the first
	// tokens or Wildcard): kept so that Restore rebuilds the same tree.
	Path []string
	// Overflow marks a group's overflow template, where messages go when
	// the group or the miner is full. Its Tokens are just Wildcard.
	Overflow bool
}

// Miner mines templates. It is safe for concurrent use.
type Miner struct {
	cfg Config
	mu  sync.Mutex
	// groups by name; bytes is what they cost (see cost.go); rejected
	// counts messages of groups there was no room for.
	groups   map[string]*group
	bytes    int64
	rejected int64
}

type group struct {
	name       string
	roots      map[int]*node // by token count
	templates  []*cluster    // by Seq
	ids        map[string]bool
	overflowID string
	overflow   int64
}

type node struct {
	children map[string]*node
	clusters []*cluster // in a leaf
}

type cluster struct {
	id     string
	tokens []string
	kinds  []kind
	count  int64
	seq    int64
	path   []string
}

// New returns a Miner, or an error naming the Config field that is out of
// range.
func New(cfg Config) (*Miner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Miner{cfg: cfg, groups: map[string]*group{}}, nil
}

// Add mines one message of group, given as its tokens (Tokenize), and
// returns the template it joined and whether that template is new or its
// tokens changed (what a caller persisting templates must write).
//
// The message descends the group's tree by its token count and first
// tokens (a token holding a placeholder descends through the wildcard
// child, as Drain does for tokens with digits) to a leaf, and joins the
// leaf's template with the highest similarity (equal positions over all
// positions; ties to the one with more wildcards, then the older) when
// that reaches the threshold and no position differs in what tells
// problems apart (see kindOf): a code, a quoted name or a word. Else the
// message starts a template of its own.
//
// Only the first MaxTokens tokens count, each cut to MaxTokenBytes,
// invalid UTF-8 and NUL bytes replaced. When the group has MaxTemplates
// templates, the leaf MaxChildren, or the miner MaxBytes, a message that
// would start a template joins the group's overflow template instead; for
// a new group the miner has no room for, that template is returned with
// Count 0 and nothing is kept.
func (m *Miner) Add(groupName string, tokens []string) (Template, bool) {
	tokens = m.clean(tokens)
	kinds := kindsOf(tokens)
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[groupName]
	if g == nil {
		cost := groupCost(groupName)
		if m.bytes+cost > m.cfg.MaxBytes {
			m.rejected++
			return Template{Group: groupName, ID: overflowID(groupName), Tokens: []string{Wildcard}, Overflow: true}, false
		}
		g = &group{name: strings.Clone(groupName), roots: map[int]*node{}, ids: map[string]bool{}, overflowID: overflowID(groupName)}
		g.ids[g.overflowID] = true
		m.groups[g.name] = g
		m.bytes += cost
	}
	if leaf := m.search(g, tokens); leaf != nil {
		if c := m.best(leaf, tokens, kinds); c != nil {
			c.count++
			changed := m.generalize(c, tokens)
			return c.template(g.name), changed
		}
	}
	return m.create(g, tokens, kinds)
}

// clean applies the token limits, copying only when something changes.
func (m *Miner) clean(tokens []string) []string {
	if len(tokens) > m.cfg.MaxTokens {
		tokens = tokens[:m.cfg.MaxTokens]
	}
	copied := false
	for i, t := range tokens {
		c := t
		if strings.IndexByte(c, 0) >= 0 {
			c = strings.ReplaceAll(c, "\x00", "\uFFFD")
		}
		if !utf8.ValidString(c) {
			c = strings.ToValidUTF8(c, "\uFFFD")
		}
		c = cutUTF8(c, m.cfg.MaxTokenBytes)
		if c != t {
			if !copied {
				tokens, copied = slices.Clone(tokens), true
			}
			tokens[i] = c
		}
	}
	return tokens
}

// search returns the leaf a message descends to, or nil: Drain3's tree
// search, a token's own child first, then the wildcard child.
func (m *Miner) search(g *group, tokens []string) *node {
	n := g.roots[len(tokens)]
	if n == nil {
		return nil
	}
	for d := 0; d < m.depth() && d < len(tokens); d++ {
		child := n.children[descentKey(tokens[d])]
		if child == nil {
			child = n.children[Wildcard]
		}
		if child == nil {
			return nil
		}
		n = child
	}
	return n
}

func (m *Miner) depth() int { return m.cfg.MaxDepth - 2 }

// best returns the leaf's template the message joins, or nil.
func (m *Miner) best(leaf *node, tokens []string, kinds []kind) *cluster {
	var best *cluster
	bestSim, bestWild := -1.0, -1
	for _, c := range leaf.clusters {
		sim, wild, ok := similarity(c, tokens, kinds)
		if ok && (sim > bestSim || sim == bestSim && wild > bestWild) {
			best, bestSim, bestWild = c, sim, wild
		}
	}
	if best == nil || bestSim < m.cfg.SimilarityThreshold {
		return nil
	}
	return best
}

// generalize makes the positions where tokens differ from c wildcards and
// reports whether any did.
func (m *Miner) generalize(c *cluster, tokens []string) bool {
	changed := false
	for i, t := range c.tokens {
		if t != Wildcard && t != tokens[i] {
			m.bytes -= tokenCost(t) - tokenCost(Wildcard)
			c.tokens[i], c.kinds[i] = Wildcard, 0
			changed = true
		}
	}
	return changed
}

// create starts a template for a message, or counts it in the group's
// overflow template when a limit is reached.
func (m *Miner) create(g *group, tokens []string, kinds []kind) (Template, bool) {
	path, nodesCost := m.plan(g, tokens)
	c := &cluster{tokens: cloneStrings(tokens), kinds: kinds, count: 1, path: path}
	leaf := m.leafAt(g, len(tokens), path, false)
	full := len(g.templates) >= m.cfg.MaxTemplates || leaf != nil && len(leaf.clusters) >= m.cfg.MaxChildren
	if !full {
		c.id = uniqueID(g, tokens)
		full = m.bytes+nodesCost+clusterCost(c) > m.cfg.MaxBytes
	}
	if full {
		g.overflow++
		return g.overflowTemplate(), g.overflow == 1
	}
	c.seq = int64(len(g.templates)) + 1
	m.file(g, c)
	return c.template(g.name), true
}

// plan returns the descent a new template is filed under, Drain3's: a
// token's own child when it exists or there is room for it, else the
// wildcard child; and what the nodes it would create cost.
func (m *Miner) plan(g *group, tokens []string) ([]string, int64) {
	path := make([]string, 0, min(m.depth(), len(tokens)))
	n := g.roots[len(tokens)]
	var cost int64
	if n == nil {
		cost += nodeCost("")
	}
	for d := 0; d < m.depth() && d < len(tokens); d++ {
		key := descentKey(tokens[d])
		var children map[string]*node
		if n != nil {
			children = n.children
		}
		if _, ok := children[key]; !ok && key != Wildcard {
			_, hasWild := children[Wildcard]
			switch room := len(children); {
			case hasWild && room >= m.cfg.MaxChildren, !hasWild && room+1 >= m.cfg.MaxChildren:
				key = Wildcard
			}
		}
		path = append(path, strings.Clone(key))
		if n != nil {
			n = children[key]
		}
		if n == nil {
			cost += nodeCost(key)
		}
	}
	return path, cost
}

// leafAt walks path from the root for a token count, creating the nodes
// when create is set; without it, nil when a node is missing.
func (m *Miner) leafAt(g *group, count int, path []string, create bool) *node {
	n := g.roots[count]
	if n == nil {
		if !create {
			return nil
		}
		n = &node{}
		g.roots[count] = n
		m.bytes += nodeCost("")
	}
	for _, key := range path {
		child := n.children[key]
		if child == nil {
			if !create {
				return nil
			}
			if n.children == nil {
				n.children = map[string]*node{}
			}
			child = &node{}
			n.children[key] = child
			m.bytes += nodeCost(key)
		}
		n = child
	}
	return n
}

// file adds a template to its group and its leaf.
func (m *Miner) file(g *group, c *cluster) {
	leaf := m.leafAt(g, len(c.tokens), c.path, true)
	leaf.clusters = append(leaf.clusters, c)
	g.templates = append(g.templates, c)
	g.ids[c.id] = true
	m.bytes += clusterCost(c)
}

func (c *cluster) template(groupName string) Template {
	return Template{Group: groupName, ID: c.id, Tokens: slices.Clone(c.tokens), Count: c.count, Seq: c.seq, Path: slices.Clone(c.path)}
}

func (g *group) overflowTemplate() Template {
	return Template{Group: g.name, ID: g.overflowID, Tokens: []string{Wildcard}, Count: g.overflow, Overflow: true}
}

// uniqueID hashes the group and the first message's tokens, again with a
// counter while the ID is taken. A template's first message always matches
// it (generalizing keeps the positions where it was equal, at least the
// threshold's share), so two templates of one group start alike only by a
// hash collision; the counter keeps IDs unique even then.
func uniqueID(g *group, tokens []string) string {
	for attempt := uint64(0); ; attempt++ {
		h := sha256.New()
		h.Write(salt)
		writeField(h, g.name)
		for _, t := range tokens {
			writeField(h, t)
		}
		if attempt > 0 {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], attempt)
			h.Write(b[:])
		}
		if id := hex.EncodeToString(h.Sum(nil)[:8]); !g.ids[id] {
			return id
		}
	}
}

func overflowID(groupName string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte("overflow\n"))
	writeField(h, groupName)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// writeField writes s length-prefixed, so that no two token lists hash
// alike by moving a boundary.
func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(s)))])
	h.Write([]byte(s))
}

// cloneStrings copies the strings too: a token may be a slice of a large
// message, which a template must not keep alive.
func cloneStrings(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		if s == Wildcard {
			out[i] = Wildcard
		} else {
			out[i] = strings.Clone(s)
		}
	}
	return out
}

// Stats is what a miner holds.
type Stats struct {
	Groups, Templates int
	// Bytes is the memory the miner accounts for (Config.MaxBytes bounds it).
	Bytes int64
	// Overflowed counts the messages that went to overflow templates,
	// including those of groups there was no room for.
	Overflowed int64
}

// Stats returns what the miner holds.
func (m *Miner) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{Groups: len(m.groups), Bytes: m.bytes, Overflowed: m.rejected}
	for _, g := range m.groups {
		s.Templates += len(g.templates)
		s.Overflowed += g.overflow
	}
	return s
}
