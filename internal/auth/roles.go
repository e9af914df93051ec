package auth

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Roles is a loaded roles file (docs/security.md): named roles, each granting
// actions on queue globs, and the members of each role — identity-provider
// groups, token subjects or emails. A person's grants are those of every role
// any of their groups, their subject or their email is a member of; someone
// in no role is authenticated but may do nothing.
type Roles struct {
	roles   map[string]Grant
	members []Member
	groups  map[string]bool // every group any member entry names
}

// Member gives roles to the people one entry matches: exactly one of Group,
// Subject and Email is set.
type Member struct {
	Group   string   `yaml:"group"`
	Subject string   `yaml:"subject"`
	Email   string   `yaml:"email"`
	Roles   []string `yaml:"roles"`
}

// roleSpec is a role as the file writes it.
type roleSpec struct {
	Actions []Action `yaml:"actions"`
	Queues  []string `yaml:"queues"`
}

type rolesFile struct {
	Roles   map[string]roleSpec `yaml:"roles"`
	Members []Member            `yaml:"members"`
}

// Bounds of a roles file, so that a mistake (a generated file gone wrong)
// is an error rather than a slow request path.
const (
	maxRoles   = 1000
	maxMembers = 10000
	maxGlobs   = 100
	maxNameLen = 249 // Kafka's longest topic name
)

// LoadRoles reads a roles file; every problem names the file and the path
// of the entry it is in, and unknown fields are errors.
func LoadRoles(path string) (*Roles, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read roles file: %w", err)
	}
	r, err := ParseRoles(data)
	if err != nil {
		return nil, fmt.Errorf("roles file %s: %w", path, err)
	}
	return r, nil
}

// ParseRoles reads the content of a roles file.
func ParseRoles(data []byte) (*Roles, error) {
	var f rolesFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	if len(f.Roles) > maxRoles {
		errs = append(errs, fmt.Errorf("roles: at most %d roles, got %d", maxRoles, len(f.Roles)))
	}
	if len(f.Members) > maxMembers {
		errs = append(errs, fmt.Errorf("members: at most %d entries, got %d", maxMembers, len(f.Members)))
	}
	r := &Roles{roles: map[string]Grant{}, groups: map[string]bool{}}
	names := make([]string, 0, len(f.Roles))
	for name := range f.Roles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		spec := f.Roles[name]
		at := "roles." + name
		if name == "" || len(name) > 100 {
			errs = append(errs, fmt.Errorf("%s: a role name must be 1 to 100 characters", at))
		}
		if len(spec.Actions) == 0 {
			errs = append(errs, fmt.Errorf("%s.actions: at least one of %s is required", at, actionList()))
		}
		for i, a := range spec.Actions {
			if !a.Valid() {
				errs = append(errs, fmt.Errorf("%s.actions[%d]: must be one of %s, got %q", at, i, actionList(), a))
			}
		}
		if len(spec.Queues) == 0 {
			errs = append(errs, fmt.Errorf("%s.queues: at least one queue glob is required (\"*\" is every queue)", at))
		}
		if len(spec.Queues) > maxGlobs {
			errs = append(errs, fmt.Errorf("%s.queues: at most %d globs, got %d", at, maxGlobs, len(spec.Queues)))
		}
		for i, g := range spec.Queues {
			if msg := globProblem(g); msg != "" {
				errs = append(errs, fmt.Errorf("%s.queues[%d]: %s, got %q", at, i, msg, g))
			}
		}
		r.roles[name] = Grant{Role: name, Actions: spec.Actions, Queues: spec.Queues}
	}
	for i, m := range f.Members {
		at := fmt.Sprintf("members[%d]", i)
		set := 0
		for _, v := range []string{m.Group, m.Subject, m.Email} {
			if v != "" {
				set++
			}
		}
		if set != 1 {
			errs = append(errs, fmt.Errorf("%s: set exactly one of group, subject and email", at))
		}
		if len(m.Roles) == 0 {
			errs = append(errs, fmt.Errorf("%s.roles: at least one role is required", at))
		}
		for j, name := range m.Roles {
			if _, ok := f.Roles[name]; !ok {
				errs = append(errs, fmt.Errorf("%s.roles[%d]: no role %q is defined under roles", at, j, name))
			}
		}
		if m.Group != "" {
			r.groups[m.Group] = true
		}
		m.Email = strings.ToLower(m.Email)
		r.members = append(r.members, m)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// globProblem says what is wrong with a queue glob, or "". A glob is a
// Kafka topic name (letters, digits, '.', '_', '-') in which '*' stands for
// any run of characters and '?' for one: what both path.Match (here) and
// SQL LIKE (in the store) read the same way.
func globProblem(g string) string {
	if g == "" || len(g) > maxNameLen {
		return fmt.Sprintf("must be 1 to %d characters", maxNameLen)
	}
	for _, c := range g {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == '*', c == '?':
		default:
			return "must hold only topic name characters (letters, digits, '.', '_', '-') and the wildcards '*' and '?'"
		}
	}
	return ""
}

func actionList() string {
	s := make([]string, len(Actions))
	for i, a := range Actions {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// Identity is what an identity provider says about a person.
type Identity struct {
	Subject string
	Email   string
	Groups  []string
}

// Grants are the grants of every role id's groups, subject or email is a
// member of, each role once, in the order the roles file lists members.
func (r *Roles) Grants(id Identity) []Grant {
	if r == nil {
		return nil
	}
	email := strings.ToLower(id.Email)
	var out []Grant
	seen := map[string]bool{}
	for _, m := range r.members {
		match := m.Group != "" && slices.Contains(id.Groups, m.Group) ||
			m.Subject != "" && m.Subject == id.Subject ||
			m.Email != "" && email != "" && m.Email == email
		if !match {
			continue
		}
		for _, name := range m.Roles {
			if !seen[name] {
				seen[name] = true
				out = append(out, r.roles[name])
			}
		}
	}
	return out
}

// Relevant keeps the groups the roles file names, in order: all a session
// needs to carry of a person's (possibly hundreds of) groups.
func (r *Roles) Relevant(groups []string) []string {
	var out []string
	for _, g := range groups {
		if r != nil && r.groups[g] && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// Roles is the names of the roles of p's grants, each once, in order.
func (p Principal) Roles() []string {
	out := []string{}
	for _, g := range p.Grants {
		if !slices.Contains(out, g.Role) {
			out = append(out, g.Role)
		}
	}
	return out
}
