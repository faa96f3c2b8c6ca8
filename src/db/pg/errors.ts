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

/**
 * Whether an error means the connection is gone: the connection class (08xxx), or the server
 * ending the session (57P01 admin_shutdown, e.g. pg_terminate_backend or a fast shutdown; 57P02
 * crash_shutdown; 57P03 cannot_connect_now). The server sends 57P01 before it closes the socket, so
 * the statement that receives it is the first to know: the connection must be dropped there and
 * then, not when the socket's close is noticed later (a later statement of the same transaction
 * would otherwise run on the dead client and fail as if nothing were known).
 */
export const endsConnection = (code: string): boolean => code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03'

/** The plain shape an error crosses the thread boundary in (structured clone keeps no class). */
export interface WireError {
  message: string
  code: string
  detail?: string | undefined
  constraint?: string | undefined
}

export const fromWire = (e: WireError): PgError => new PgError(e.message, e.code, e.detail, e.constraint)
