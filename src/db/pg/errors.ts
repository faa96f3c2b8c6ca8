/**
 * An error from PostgreSQL, or from the way to it, as the caller of the synchronous bridge sees
 * it: `code` is always a SQLSTATE (PostgreSQL's Appendix A), so callers test one field whatever
 * went wrong: '23505' a unique violation, '40001' a serialization failure to retry, '57014' a
 * statement cancelled by statement_timeout, '08xxx' the connection (refused, lost, or no reply
 * from the bridge within its deadline).
 */
export class PgError extends Error {
  override name = 'PgError'
  constructor(
    message: string,
    readonly code: string,
    readonly detail?: string,
    readonly constraint?: string,
  ) {
    super(message)
  }
}

/** SQLSTATEs of the connection class that the bridge gives to failures with no SQLSTATE of their own. */
export const SQLSTATE = {
  /** sqlclient_unable_to_establish_sqlconnection: connect refused, DNS, authentication transport. */
  cannotConnect: '08001',
  /** connection_failure: the connection died, or the bridge got no reply within its deadline. */
  connectionFailure: '08006',
  /** unique_violation */
  uniqueViolation: '23505',
  /** query_canceled (statement_timeout) */
  queryCanceled: '57014',
} as const

/** The plain shape an error crosses the thread boundary in (structured clone keeps no class). */
export interface WireError {
  message: string
  code: string
  detail?: string | undefined
  constraint?: string | undefined
}

export const fromWire = (e: WireError): PgError => new PgError(e.message, e.code, e.detail, e.constraint)
