import type { FilesRepo } from '../db/repos/files'
import type { OutboxRepo } from '../db/repos/outbox'
import { fileEventPayload, type UploadError } from '../contract/webhooks'
import type { Clock } from '../lib/clock'
import { uuidv7 } from '../lib/ids'

/**
 * Writes `file.uploaded` / `file.failed` events into the outbox. Call it inside the transaction
 * that settles the upload, so the event exists if and only if the change does; listeners (the
 * scheduler) are told after the current synchronous transaction has committed.
 */
export class FileEvents {
  private readonly listeners: (() => void)[] = []

  constructor(
    private readonly outbox: OutboxRepo,
    private readonly files: FilesRepo,
    private readonly clock: Clock,
  ) {}

  /** Enqueues the event for an upload that just completed (no error) or failed. No-op without a webhook URL. */
  settled(fileId: string, error?: UploadError): void {
    const f = this.files.get(fileId)
    if (!f || f.webhookUrl === null) return
    const now = this.clock.now()
    const event = error ? ('file.failed' as const) : ('file.uploaded' as const)
    this.outbox.insert({
      id: `msg_${uuidv7(now).replace(/-/g, '')}`,
      tenantId: f.tenantId,
      fileId: f.id,
      event,
      url: f.webhookUrl,
      payload: JSON.stringify(fileEventPayload(event, f, now, error)),
      now,
    })
    setImmediate(() => this.listeners.forEach((l) => l()))
  }

  onEnqueued(listener: () => void): void {
    this.listeners.push(listener)
  }
}
