// Core's events reach a client's listeners in batches on the event loop, after the call that
// caused them: the integration tests wait for them (bounded) through recovery-support's waitFor.
import { waitFor } from "../recovery-support.mjs";

/** The events of `kind` in `events` once there are at least `n`; throws after `limitS` seconds. */
export function eventsOf(events, kind, n = 1, limitS = 10) {
  return waitFor(limitS, `${n} ${kind} event(s)`, () => {
    const got = events.filter((e) => e.kind === kind);
    return got.length >= n ? got : null;
  });
}
