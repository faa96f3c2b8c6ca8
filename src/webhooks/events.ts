import type { FilesRepo } from '../db/repos/files'
import type { OutboxRepo } from '../db/repos/outbox'
import { fileView } from '../services/files'
import { isoTime, type Clock } from '../lib/clock'
import { uuidv7 } from '../lib/ids'

export interface UploadError {
  code: string
  message: string
}

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
    const payload = {
      event,
      fileId: f.id,
      tenantId: f.tenantId,
      workspaceId: f.workspaceId,
      file: fileView(f),
      timestamp: isoTime(now),
      ...(error ? { error: { code: error.code, message: error.message } } : {}),
    }
    this.outbox.insert({
      id: `msg_${uuidv7(now).replace(/-/g, '')}`,
      tenantId: f.tenantId,
      fileId: f.id,
      event,
      url: f.webhookUrl,
      payload: JSON.stringify(payload),
      now,
    })
    setImmediate(() => this.listeners.forEach((l) => l()))
  }

  onEnqueued(listener: () => void): void {
    this.listeners.push(listener)
  }
}
