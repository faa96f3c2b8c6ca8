import type { FileRecord } from '../db/repos/files'
import type { FileEventName, OutboxEvent } from '../db/repos/outbox'
import { isoTime } from '../lib/clock'
import { fileView } from './files'

/** Why an upload failed, as a `file.failed` event reports it. */
export interface UploadError {
  code: string
  message: string
}

/** The JSON body of a `file.uploaded` / `file.failed` webhook (contract: Webhooks). */
export function fileEventPayload(event: FileEventName, f: FileRecord, now: number, error?: UploadError) {
  return {
    event,
    fileId: f.id,
    tenantId: f.tenantId,
    workspaceId: f.workspaceId,
    file: fileView(f),
    timestamp: isoTime(now),
    ...(error ? { error: { code: error.code, message: error.message } } : {}),
  }
}

/** An outbox event as `coffer webhooks list` shows it: the delivery state, never the payload. */
export function outboxEventView(e: OutboxEvent) {
  return {
    id: e.id,
    event: e.event,
    status: e.status,
    attempts: e.attempts,
    fileId: e.fileId,
    tenantId: e.tenantId,
    url: e.url,
    lastError: e.lastError,
    createdAt: isoTime(e.createdAt),
    nextAttemptAt: e.status === 'pending' ? isoTime(e.nextAttemptAt) : null,
    deliveredAt: e.deliveredAt === null ? null : isoTime(e.deliveredAt),
  }
}
