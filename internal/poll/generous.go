package poll

import "time"

// Generous is the deadline for a condition that must eventually hold. CI runs the suite on a
// shared 2-core machine with load averages above 10, where a loopback hop or a goroutine wake-up
// can take seconds; a deadline only bounds how long a failing test takes to say so, so it costs
// nothing on success. Use it instead of hand-picked 5 or 10 second deadlines.
const Generous = 60 * time.Second
