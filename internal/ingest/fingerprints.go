package ingest

import (
	"strings"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/fingerprint"
)

// fingerprints computes a batch's fingerprints and incident signatures,
// each distinct failure once: in an outage most records of a batch fail
// alike, and normalizing a message is ingest's costliest step after
// encoding.
type fingerprints struct {
	byFailure   map[string]string    // type, message and top frames → fingerprint
	signatureOf map[string]signature // fingerprint → normalized message and frames
}

type signature struct {
	message string
	frames  []string
}

func newFingerprints() *fingerprints {
	return &fingerprints{byFailure: map[string]string{}, signatureOf: map[string]signature{}}
}

// of returns the fingerprint of a failure.
func (f *fingerprints) of(e *dlq.ErrorEntry) string {
	key := failureKey(e)
	if fp, ok := f.byFailure[key]; ok {
		return fp
	}
	fp := fingerprint.Of(e.Type, e.Message, e.Backtrace)
	f.byFailure[key] = fp
	return fp
}

// signature returns the normalized message and the top frames of a
// fingerprint's failure.
func (f *fingerprints) signature(fp string, e *dlq.ErrorEntry) (string, []string) {
	if s, ok := f.signatureOf[fp]; ok {
		return s.message, s.frames
	}
	s := signature{fingerprint.Normalize(e.Message), fingerprint.TopFrames(e.Backtrace)}
	f.signatureOf[fp] = s
	return s.message, s.frames
}

// failureKey holds everything a fingerprint depends on: the type, the
// message and the raw backtrace lines up to its top frames.
func failureKey(e *dlq.ErrorEntry) string {
	var b strings.Builder
	b.Grow(len(e.Type) + len(e.Message) + 64)
	b.WriteString(e.Type)
	b.WriteByte(0)
	b.WriteString(e.Message)
	frames := 0
	for _, line := range e.Backtrace {
		b.WriteByte(0)
		b.WriteString(line)
		if strings.TrimSpace(line) != "" {
			if frames++; frames == fingerprint.Frames {
				break
			}
		}
	}
	return b.String()
}
