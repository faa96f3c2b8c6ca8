import type { FileRecord, FilesRepo } from '../db/repos/files'
import type { FileEventName, OutboxRepo } from '../db/repos/outbox'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { VersionsRepo } from '../db/repos/versions'
import { fileEventPayload, type UploadError } from '../contract/webhooks'
import type { Clock } from '../lib/clock'
import { uuidv7 } from '../lib/ids'

/**
 * Writes `file.uploaded` / `file.failed` / `file.deleted` events into the outbox. Call it inside the
 * transaction that makes the change, so the event exists if and only if the change does; listeners
 * (the scheduler) are told after the current synchronous transaction has committed.
 *
 * Two URLs may want an event: the upload's own `webhookUrl` (file.uploaded, file.failed) and its
 * workspace's (file.uploaded, file.deleted). When both want the same event at the same URL, one
 * event is written.
 */
export class FileEvents {
  private readonly listeners: (() => void)[] = []

  constructor(
    private readonly outbox: OutboxRepo,
    private readonly files: FilesRepo,
    private readonly workspaces: WorkspacesRepo,
    private readonly clock: Clock,
    /** Object versions: an event of a file in a versioned bucket carries its versionId (#25). */
    private readonly versions?: VersionsRepo,
  ) {}

  /** Enqueues the events of an upload that just completed (no error) or failed, through either front. */
  settled(fileId: string, error?: UploadError): void {
    const f = this.files.get(fileId)
    if (!f) return
    const event = error ? ('file.failed' as const) : ('file.uploaded' as const)
    const urls = new Set<string>()
    if (f.webhookUrl !== null) urls.add(f.webhookUrl)
    // A failed upload never made a file of the workspace: its workspace is not told.
    if (!error) this.workspaceUrl(f).forEach((u) => urls.add(u))
    this.enqueue(f, event, urls, error)
  }

  /**
   * settled() of an S3 object just written (PutObject, CopyObject, CompleteMultipartUpload): such a
   * file has no webhook of its own, so only its bucket's URL, which the caller has read in the same
   * transaction, may want the event; without one nothing is read (#29: two statements per write).
   */
  settledObject(fileId: string, workspaceUrl: string | null): void {
    if (workspaceUrl !== null) this.settled(fileId)
  }

  /**
   * Enqueues `file.deleted` for a completed file that was just soft-deleted (API delete, S3
   * DeleteObject(s), an object replaced by a write). Only the workspace's URL is told: the
   * upload's own URL asked to hear how its upload ended, which it already has.
   */
  deleted(fileId: string): void {
    const f = this.files.get(fileId)
    if (!f || f.status !== 'completed') return
    this.enqueue(f, 'file.deleted', new Set(this.workspaceUrl(f)))
  }

  onEnqueued(listener: () => void): void {
    this.listeners.push(listener)
  }

  /**
   * The versionId of the version the file is, in a bucket whose versioning was ever enabled (S3's
   * own event notifications carry one only there): undefined otherwise, so unversioned events
   * keep their shape.
   */
  private versionIdOf(f: FileRecord): string | undefined {
    if (!this.versions || f.workspaceId === null || this.versions.versioning(f.workspaceId) === null) return undefined
    return this.versions.byFile(f.id)?.versionId
  }

  private workspaceUrl(f: FileRecord): string[] {
    if (f.workspaceId === null) return []
    const url = this.workspaces.getLive(f.tenantId, f.workspaceId)?.webhookUrl
    return url ? [url] : []
  }

  private enqueue(f: FileRecord, event: FileEventName, urls: Set<string>, error?: UploadError): void {
    if (urls.size === 0) return
    const now = this.clock.now()
    const payload = JSON.stringify(fileEventPayload(event, f, now, error, this.versionIdOf(f)))
    for (const url of urls) {
      this.outbox.insert({ id: `msg_${uuidv7(now).replace(/-/g, '')}`, tenantId: f.tenantId, fileId: f.id, event, url, payload, now })
    }
    setImmediate(() => this.listeners.forEach((l) => l()))
  }
}
