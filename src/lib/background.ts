/**
 * A long-lived component of the server (the periodic sweeps, the webhook scheduler): started once
 * the server listens, stopped on shutdown before the database closes. Both calls are idempotent;
 * stop() resolves once the component's current work is done and it will start no more.
 */
export interface Background {
  readonly name: string
  start(): void
  stop(): Promise<void>
}
