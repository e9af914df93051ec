package template

import (
	"cmp"
	"fmt"
	"slices"
)

// Snapshot returns every template, groups in name order and each group's
// templates by Seq, its overflow template (when it was used) last. Restore
// takes it back.
func (m *Miner) Snapshot() []Template {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.groups))
	for name := range m.groups {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Template
	for _, name := range names {
		g := m.groups[name]
		for _, c := range g.templates {
			out = append(out, c.template(g.name))
		}
		if g.overflow > 0 {
			out = append(out, g.overflowTemplate())
		}
	}
	return out
}

// Restore replaces the miner's templates with ts, a Snapshot's (of a miner
// with the same Config), in any order. The miner then behaves as the one
// snapshotted did: the same messages join the same templates and new ones
// get the same IDs. On an error, which names the template and the field at
// fault, the miner is left as it was.
//
// Restore does not apply the Config's limits to what it loads (templates
// are what incidents are built on and cannot be dropped); past a limit, no
// new template is made.
func (m *Miner) Restore(ts []Template) error {
	sorted := slices.Clone(ts)
	slices.SortStableFunc(sorted, func(a, b Template) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Seq, b.Seq))
	})
	fresh := &Miner{cfg: m.cfg, groups: map[string]*group{}}
	for _, t := range sorted {
		if err := fresh.restore(t); err != nil {
			return fmt.Errorf("template: restore template %q of group %q: %w", t.ID, t.Group, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups, m.bytes, m.rejected = fresh.groups, fresh.bytes, 0
	return nil
}

func (m *Miner) restore(t Template) error {
	g := m.groups[t.Group]
	if g == nil {
		g = &group{name: t.Group, roots: map[int]*node{}, ids: map[string]bool{}, overflowID: overflowID(t.Group)}
		g.ids[g.overflowID] = true
		m.groups[t.Group] = g
		m.bytes += groupCost(t.Group)
	}
	if t.Count < 0 {
		return fieldErr("Count", "%d, want at least 0", t.Count)
	}
	if t.Overflow {
		if t.ID != g.overflowID {
			return fieldErr("ID", "want the group's overflow ID %s", g.overflowID)
		}
		if g.overflow > 0 {
			return fieldErr("Overflow", "a second overflow template")
		}
		g.overflow = max(t.Count, 1)
		return nil
	}
	switch want := int64(len(g.templates)) + 1; {
	case t.Seq != want:
		return fieldErr("Seq", "%d, want %d (the group's templates numbered from 1 without gaps)", t.Seq, want)
	case t.ID == "" || len(t.ID) > 64:
		return fieldErr("ID", "%q, want 1 to 64 characters", t.ID)
	case g.ids[t.ID]:
		return fieldErr("ID", "used twice in the group")
	case len(t.Tokens) > MaxTokensLimit:
		return fieldErr("Tokens", "%d, want at most %d", len(t.Tokens), MaxTokensLimit)
	case len(t.Path) != min(m.depth(), len(t.Tokens)):
		return fieldErr("Path", "%d tokens, want %d for %d tokens and MaxDepth %d",
			len(t.Path), min(m.depth(), len(t.Tokens)), len(t.Tokens), m.cfg.MaxDepth)
	}
	tokens := cloneStrings(t.Tokens)
	m.file(g, &cluster{id: t.ID, tokens: tokens, kinds: kindsOf(tokens), count: t.Count, seq: t.Seq, path: cloneStrings(t.Path)})
	return nil
}

// fieldError names the field of a Template that Restore rejects.
type fieldError struct{ field, problem string }

func (e *fieldError) Error() string { return e.field + ": " + e.problem }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...)}
}
