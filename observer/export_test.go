package observer

// MeasureDescribed is Event.Measure by walking the event's description, without
// the hand-written cases of the per-frame events.
var MeasureDescribed = measureDescribed

// MaxWords is how many closed-vocabulary keys Event.Words collects.
const MaxWords = maxWords
