package sandbox

import "slices"

// The sidecar's secrets (Paths.Secrets: the state store's master key
// files) are kept from every tree with a filesystem sandbox. Landlock
// only grants, so a workspace tree, which reads "/", and a strict one
// whose readable paths hold a key (a key under /etc) would read it; the
// plan hides each key instead with a mount over it in the tree's mount
// namespace (Plan.Mask). A mount point cannot be renamed, removed or
// have a file renamed over it (EBUSY), and the directories between a
// key and the writable root holding it are pinned as for a protected
// path, so a tree that may write the key's directory cannot put a key
// of its own in its place either (the next sidecar started would load
// it). Where no mount namespace can be made, a secret the tree could
// reach refuses the open, as a protected path in a writable one does.

// planSecrets adds paths.Secrets to plan as masks (Plan.Mask, with pins
// for those under a writable root, and Plan.NoDev) when bind is true; a
// tree that keeps its capabilities (keep true) is refused instead, as
// capabilities reach a hidden file's bytes another way (/proc/kcore,
// open_by_handle_at). reach are the
// tree's readable and writable paths (resolved): without bind, a secret
// beneath one of them is a *ConflictError, as is, always, a writable path
// that is or lies inside a secret, or a link to a secret
// (Paths.SecretLinks) that lies beneath a writable path. A secret that
// does not exist is left out.
func planSecrets(paths Paths, writable, reach []string, bind, keep bool, exists func(string) (bool, bool), plan *Plan, ap *Applied) error {
	secrets := uniqueSorted(nonEmpty(paths.Secrets))
	var moved []string
	for _, w := range writable {
		for _, s := range secrets {
			if Within(w, s) {
				moved = append(moved, s)
			}
		}
		for _, l := range nonEmpty(paths.SecretLinks) {
			if Within(l, w) {
				moved = append(moved, l)
			}
		}
	}
	if len(moved) > 0 {
		return &ConflictError{Paths: uniqueSorted(moved), Why: "a writable path is, lies inside, or holds a link to a file no agent may read or replace (the state store's master key)"}
	}
	var mask, hidden []string
	for _, s := range secrets {
		if ok, _ := exists(s); !ok || plan.NewPIDNS && Within(s, DevShm) {
			// Missing, or under the tree's own fresh /dev/shm: no such name
			// there.
			continue
		}
		switch {
		case bind:
			mask = append(mask, s)
		case withinAny(s, reach):
			hidden = append(hidden, s)
		}
	}
	if len(hidden) > 0 {
		return &ConflictError{Paths: hidden, Why: "the sandbox would let the agent read a file no agent may read (the state store's master key), and this sidecar cannot make a private mount namespace to hide it"}
	}
	if len(mask) == 0 {
		return nil
	}
	if keep {
		return &ConflictError{Paths: mask, Why: "a tree that keeps its capabilities could read a file no agent may read (the state store's master key) past its mask"}
	}
	plan.Mask, ap.Masked, plan.NoDev = mask, mask, true
	plan.Pin = pins(writable, append(slices.Clone(plan.ReadOnly), mask...))
	return nil
}

// withinAny reports whether p is or lies beneath any of dirs.
func withinAny(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return Within(p, d) })
}
