package template

// What the miner accounts for its structures, in bytes: close to what the
// Go heap holds for them (string and slice headers, map entries, structs),
// computed from the current state only, so that a restored miner accounts
// exactly what the original did and reaches MaxBytes at the same message.
const (
	groupOverhead   = 320 // group struct, its maps, the groups map entry
	nodeOverhead    = 160 // node struct, the parent's map entry
	clusterOverhead = 200 // cluster struct, slice headers, leaf and group entries, id
	perToken        = 17  // string header and kind
)

func groupCost(name string) int64 { return groupOverhead + int64(len(name)) }

func nodeCost(key string) int64 {
	if key == Wildcard {
		return nodeOverhead
	}
	return nodeOverhead + int64(len(key))
}

func tokenCost(t string) int64 {
	if t == Wildcard {
		return perToken
	}
	return perToken + int64(len(t))
}

func clusterCost(c *cluster) int64 {
	n := int64(clusterOverhead + len(c.id))
	for _, t := range c.tokens {
		n += tokenCost(t)
	}
	for _, k := range c.path {
		n += tokenCost(k)
	}
	return n
}
