/** Requests, client errors (4xx) and server errors (5xx) counted over a window. */
export interface RequestCounts {
  requests: number
  clientErrors: number
  serverErrors: number
}

/**
 * Responses of the last minute, for the admin overview's request and error rates (#31): one slot
 * per second in a ring of 60, so recording is a clock read and three additions (the request path
 * is measured to the instruction, #15), and reading sums 60 slots whatever the traffic. A slot is
 * cleared when the ring comes round to it again, so seconds without a request cost nothing.
 */
export class RecentRequests {
  static readonly SECONDS = 60
  private readonly requests = new Float64Array(RecentRequests.SECONDS)
  private readonly clientErrors = new Float64Array(RecentRequests.SECONDS)
  private readonly serverErrors = new Float64Array(RecentRequests.SECONDS)
  /** The second (epoch seconds) each slot counts; a slot of an older second is stale. */
  private readonly second = new Float64Array(RecentRequests.SECONDS).fill(-1)

  constructor(private readonly now: () => number) {}

  record(statusCode: number): void {
    const s = Math.floor(this.now() / 1000)
    const i = s % RecentRequests.SECONDS
    if (this.second[i] !== s) {
      this.second[i] = s
      this.requests[i] = 0
      this.clientErrors[i] = 0
      this.serverErrors[i] = 0
    }
    this.requests[i]!++
    if (statusCode >= 500) this.serverErrors[i]!++
    else if (statusCode >= 400) this.clientErrors[i]!++
  }

  /** The counts of the last 60 seconds, the current one included. */
  lastMinute(): RequestCounts {
    const s = Math.floor(this.now() / 1000)
    const out: RequestCounts = { requests: 0, clientErrors: 0, serverErrors: 0 }
    for (let i = 0; i < RecentRequests.SECONDS; i++) {
      if (this.second[i]! <= s - RecentRequests.SECONDS || this.second[i]! > s) continue
      out.requests += this.requests[i]!
      out.clientErrors += this.clientErrors[i]!
      out.serverErrors += this.serverErrors[i]!
    }
    return out
  }
}
