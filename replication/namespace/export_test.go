package namespace

// MergeUpdates lets the external tests count the merges coalescing makes.
var MergeUpdates = &mergeUpdates

// CoalesceQuickAck lets the external tests make every acknowledgement slow (0): small
// updates then use coalesceInFlight UPDATEs whatever the round trip.
var CoalesceQuickAck = &coalesceQuickAck
