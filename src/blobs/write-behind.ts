/** What write-behind needs of an open file: Node's FileHandle has it. */
export interface Syncable {
  datasync(): Promise<void>
}

/**
 * Flushes a file's written data while more is still being written, so the fsync that must come
 * before an upload is acknowledged finds little left to write (#15): without it the whole body
 * sits in the page cache until that last fsync, and the client waits for all of it at the end.
 * At most one flush runs at a time, in the thread pool, beside the writes.
 *
 * A failed flush is kept and thrown by `finish`: on Linux an fsync error is reported once per
 * open file, so the final fsync on the same handle might not see it again.
 */
export class WriteBehind {
  private synced = 0
  private running: Promise<void> | undefined
  private failure: Error | undefined

  constructor(
    private readonly file: Syncable,
    /** Start a flush once this many bytes have been written since the last one started. */
    private readonly every: number,
  ) {}

  /** Call as writes complete, with the bytes written so far. */
  written(bytes: number): void {
    if (this.running || this.failure !== undefined || bytes - this.synced < this.every) return
    this.synced = bytes
    this.running = this.file.datasync().then(
      () => {
        this.running = undefined
      },
      (err: unknown) => {
        this.failure = err instanceof Error ? err : new Error(String(err))
        this.running = undefined
      },
    )
  }

  /** Waits for the flush in progress; throws what any flush failed with. */
  async finish(): Promise<void> {
    await this.running
    if (this.failure !== undefined) throw this.failure
  }
}
