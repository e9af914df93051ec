package dlq

// TopicNameProblem says what keeps name from being a legal Kafka topic name
// (1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-', and not "." or
// ".."), or "" when it is one.
func TopicNameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > 249:
		return "is longer than Kafka's limit of 249 characters"
	case name == "." || name == "..":
		return `is not a legal Kafka topic name ("." and ".." are reserved)`
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "may only contain letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}
