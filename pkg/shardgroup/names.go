package shardgroup

import (
	"strconv"
	"strings"
)

// ShardRecord is the name of the record of shard i of group.
func ShardRecord(group string, i int) string { return group + "-shard-" + strconv.Itoa(i) }

// MemberPrefix begins the name of every member record of group.
func MemberPrefix(group string) string { return group + "-member-" }

// MemberRecord is the name of the member record of identity in group:
// the identity lowercased, every character a Kubernetes object name
// cannot hold (anything but a-z, 0-9, '-' and '.') made '-', and a
// trailing '-' or '.' made 'x', so that the name is a valid Lease name
// whenever the group's is and the whole fits in 253 characters. The
// record names the identity itself as its holder.
func MemberRecord(group, identity string) string {
	name := []byte(strings.ToLower(identity))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			name[i] = '-'
		}
	}
	if n := len(name); n > 0 && (name[n-1] == '-' || name[n-1] == '.') {
		name[n-1] = 'x'
	}
	return MemberPrefix(group) + string(name)
}
