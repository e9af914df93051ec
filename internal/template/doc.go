// Package template groups failures by mining message templates online,
// after Drain (He et al., "Drain: An Online Log Parsing Approach with Fixed
// Depth Tree", ICWS 2017) and its streaming, persistent successor Drain3.
//
// Why: internal/fingerprint hashes a message normalized by hand rules, so
// any variable part a rule does not know (a pod suffix, an id without
// digits) makes a new incident; on real data 5 problems became 144
// incidents (issue 46). Rules stay (they are cheap and exact where they
// apply); the miner then learns which token positions vary among messages
// of one shape and makes them wildcards, so an unknown id format costs one
// template, not one incident per value.
//
// The pipeline is fingerprint.Normalize, Tokenize (which also masks the
// identifiers Normalize misses: Kubernetes pod names, Stripe-style ids,
// random strings) and Miner.Add, per group (queue and error type: templates
// never cross groups). Add walks a fixed-depth prefix tree (token count,
// then the first tokens) to one leaf and compares the message with that
// leaf's templates only, so it costs O(tokens) whatever the number of
// templates. A message joins the most similar template of its length when
// similarity reaches Config.SimilarityThreshold and nothing that tells
// problems apart differs (see Miner.Add); positions that differ become
// Wildcard.
//
// A template's ID is a hash of its group and its first message's tokens:
// it never changes as the template generalizes, so incident ids can be
// built on it. The same sequence of messages gives the same templates and
// ids; Snapshot and Restore persist and reload a miner with identical
// behaviour. Memory is bounded by the Config's limits whatever the input:
// past them a message goes to its group's overflow template.
//
// The package does no I/O.
package template
