package reaper

import "github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"

// Limits are the resource limits of one provider cgroup (Spec.Limits;
// cgroup.Limits, where the kinds and their cgroup files are described).
// An alias: the type is part of this package's launch seam.
type Limits = cgroup.Limits

// Resources are a provider cgroup's counters (Tree.Resources;
// cgroup.Resources). An alias: the type is part of the Tree seam
// (internal/launch's Tree).
type Resources = cgroup.Resources

// ErrLimitsUnsupported is cgroup.ErrLimitsUnsupported: Spec.Limits were
// given but the containment cannot enforce them; nothing was launched
// (docs/protocol.md §18.2).
var ErrLimitsUnsupported = cgroup.ErrLimitsUnsupported
