package template

import "fmt"

// Config tunes a Miner. The zero value of a field means its default.
type Config struct {
	// SimilarityThreshold is the fraction of a message's token positions
	// that must equal a template's (wildcards not counted) for the message
	// to join it (Drain's st). Default 0.5: on the tuning corpus
	// (testdata, TestThresholds) grouping is the same from 0.2 to 0.8, as
	// what separates problems is decided by the tokens' kinds (kindOf);
	// 0.5 sits in the middle and still asks half of a message to match.
	SimilarityThreshold float64
	// MaxDepth is the prefix tree's depth counting the root and the
	// token-count layer, so MaxDepth-2 leading tokens steer the descent.
	// Default 4 (Drain3's), at least 2.
	MaxDepth int
	// MaxChildren bounds the children of a tree node (tokens beyond it
	// descend through the wildcard child) and the templates of a leaf.
	// Default 100.
	MaxChildren int
	// MaxTemplates bounds the templates of one group. Default 1000.
	MaxTemplates int
	// MaxTokens is how many leading tokens of a message count; the rest
	// are ignored. Default 64, at most MaxTokensLimit.
	MaxTokens int
	// MaxTokenBytes cuts longer tokens. Default 128.
	MaxTokenBytes int
	// MaxBytes bounds the memory the miner's templates, trees and groups
	// take (as the miner accounts it, close to the heap it uses). Default
	// 64 MiB.
	MaxBytes int64
}

func (c Config) withDefaults() Config {
	if c.SimilarityThreshold == 0 {
		c.SimilarityThreshold = 0.5
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 4
	}
	if c.MaxChildren == 0 {
		c.MaxChildren = 100
	}
	if c.MaxTemplates == 0 {
		c.MaxTemplates = 1000
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 64
	}
	if c.MaxTokenBytes == 0 {
		c.MaxTokenBytes = 128
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 64 << 20
	}
	return c
}

func (c Config) validate() error {
	switch {
	case !(c.SimilarityThreshold > 0 && c.SimilarityThreshold <= 1):
		return fmt.Errorf("template: SimilarityThreshold: %v, want more than 0 and at most 1", c.SimilarityThreshold)
	case c.MaxDepth < 2 || c.MaxDepth > 2+MaxTokensLimit:
		return fmt.Errorf("template: MaxDepth: %d, want 2 to %d", c.MaxDepth, 2+MaxTokensLimit)
	case c.MaxChildren < 2:
		return fmt.Errorf("template: MaxChildren: %d, want at least 2", c.MaxChildren)
	case c.MaxTemplates < 1:
		return fmt.Errorf("template: MaxTemplates: %d, want at least 1", c.MaxTemplates)
	case c.MaxTokens < 1 || c.MaxTokens > MaxTokensLimit:
		return fmt.Errorf("template: MaxTokens: %d, want 1 to %d", c.MaxTokens, MaxTokensLimit)
	case c.MaxTokenBytes < 8:
		return fmt.Errorf("template: MaxTokenBytes: %d, want at least 8", c.MaxTokenBytes)
	case c.MaxBytes < 4<<10:
		return fmt.Errorf("template: MaxBytes: %d, want at least 4096", c.MaxBytes)
	}
	return nil
}
