package shardgroup

import "strconv"

// ShardRecord is the name of the record of shard i of group.
func ShardRecord(group string, i int) string { return group + "-shard-" + strconv.Itoa(i) }

// MemberPrefix begins the name of every member record of group.
func MemberPrefix(group string) string { return group + "-member-" }

// MemberRecord is the name of the member record of identity in group.
func MemberRecord(group, identity string) string { return MemberPrefix(group) + identity }
