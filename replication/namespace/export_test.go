package namespace

// MergeUpdates lets the external tests count the merges coalescing makes.
var MergeUpdates = &mergeUpdates
