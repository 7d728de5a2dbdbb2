package sandbox

import "errors"

// ErrRuleMoved is wrapped by Start's error when a rule path is no longer
// the file the plan was built for: a link now stands somewhere on its
// path, or another file has its name (docs/protocol.md §19: no rule is
// granted through a path the agent made). Nothing is launched. The
// error is a *RuleMovedError naming the path.
var ErrRuleMoved = errors.New("sandbox: a rule path was replaced since the sandbox was planned")

// RuleMovedError names the rule path that moved (errors.Is ErrRuleMoved).
type RuleMovedError struct {
	// Path is the rule's path as the plan named it (Rule.Path).
	Path string
	// Why says how it moved: "has a link on its path", "is a link" or
	// "is another file now" (its device and inode differ from the plan's).
	Why string
}

// Error returns ErrRuleMoved's text followed by the path and Why.
func (e *RuleMovedError) Error() string { return ErrRuleMoved.Error() + ": " + e.Path + " " + e.Why }

// Is makes errors.Is(err, ErrRuleMoved) hold.
func (e *RuleMovedError) Is(target error) bool { return target == ErrRuleMoved }
