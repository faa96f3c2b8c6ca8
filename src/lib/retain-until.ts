/** Object lock's retain-until dates (#25), as both fronts keep and report them. */

/**
 * The latest retain-until date Coffer keeps or reports, 9999-12-31T23:59:59.999Z: an S3 date has a
 * four-digit year, and JavaScript's Date ends in year 275760. A later one (a default rule stored
 * before its bounds were checked) locks until then, the longest a date can say.
 */
export const MAX_RETAIN_UNTIL = 253_402_300_799_999

/** A retain-until date as ISO 8601 for either front: never beyond MAX_RETAIN_UNTIL, never throwing on a stored value. */
export const retainUntilIso = (until: number): string => new Date(Number.isFinite(until) ? Math.min(until, MAX_RETAIN_UNTIL) : MAX_RETAIN_UNTIL).toISOString()
