import { AppError, notFound } from '../errors'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { Commits } from '../db/group-commit'
import type { FileRecord, FilesRepo } from '../db/repos/files'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { ObjectInfo, ObjectsRepo } from '../db/repos/objects'
import type { StagedBlob } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'
import type { FileEvents } from '../webhooks/events'
import type { Quotas, StreamCharge } from './quotas'
import type { ObjectVersions } from './versions'

export type NewUpload = Parameters<FilesRepo['insertPending']>[0]

/**
 * The write transactions of an upload's life, each complete: reserve at the handshake, commit or
 * fail when the body has been received (the content itself goes through BlobWrites). Every change
 * to a file's status writes its webhook event in the same transaction. The two that every
 * upload makes, reserve and commit, go through the group commit: they resolve once durable, with
 * one WAL flush shared by all the uploads settling at the same time.
 *
 * On PostgreSQL each is an engine transaction of its own (group-commit.ts EngineCommits), which
 * runs again after a deadlock or a serialization failure (#30), so each is safe to run twice:
 * releasing the bytes in flight (StreamCharge.release) does nothing the second time, `settle`
 * places idempotently and writes rows, and the webhook event is an outbox row, sent by the
 * scheduler after the commit.
 */
export class UploadRecords {
  constructor(
    private readonly deps: {
      db: DB | Engine
      commits: Commits
      clock: Clock
      files: FilesRepo
      workspaces: WorkspacesRepo
      quotas: Quotas
      events: FileEvents
      /** An upload into a workspace settles as its key's current version (#25). */
      versions?: ObjectVersions
      /** Records how an upload sealed under a key of its own is sealed (#27). */
      objects?: ObjectsRepo
    },
  ) {}

  /**
   * The handshake's row, with its declared size reserved. Checked and reserved in one write
   * transaction: concurrent handshakes cannot both fit, and a workspace deleted meanwhile cannot
   * receive a file. Answered without waiting for its WAL flush (GroupCommit.runUnflushed): a
   * power cut right after it can forget a pending upload, which holds no content yet; its PUT then
   * answers 404 and the client asks again. The PUT's own commit, which does wait, makes it durable
   * with it (README: Durability).
   */
  reserve(record: NewUpload): void {
    const { commits, files, workspaces, quotas } = this.deps
    commits.runUnflushed(() => {
      if (record.workspaceId !== null && !workspaces.getLive(record.tenantId, record.workspaceId)) throw notFound.workspace()
      // Also refuses a tenant deleted since its key was checked, so none of its files outlives it (#13).
      quotas.assertFits(record.tenantId, record.workspaceId, record.declaredSize ?? 0)
      // A key chosen by the client (#31) may be taken: the API never replaces an object (S3 does, with PutObject).
      const chosenKey = record.workspaceId !== null && record.objectKey !== null && !record.objectKey.startsWith(`${record.id}/`)
      if (chosenKey && this.deps.objects?.liveIdByKey(record.workspaceId!, record.objectKey!) !== undefined) {
        throw new AppError('CONFLICT', 'An object with this key already exists in the workspace', { field: 'objectKey' })
      }
      files.insertPending(record)
    })
  }

  /**
   * Turns a placed blob into a completed file; the row must still be a live pending upload.
   * `settle` records the content in the same transaction (BlobWrites.write). `sealed`: the blob
   * is the content sealed under a key of its own (a workspace whose default is aws:kms, #27): the
   * file's size (and so its quota) is the plaintext's, and the object records its key.
   */
  commit(fileId: string, staged: StagedBlob, settle: () => void, inFlight?: StreamCharge, sealed?: { size: number; info: ObjectInfo }): Promise<FileRecord> {
    const { commits, clock, files, quotas, events, versions, objects } = this.deps
    const size = sealed?.size ?? staged.size
    return commits.run(() => {
      // Its bytes stop being in flight here and, if it commits, become usage in the same tick (#12 item 3).
      inFlight?.release()
      const current = files.get(fileId)
      if (!current || current.deletedAt !== null) throw notFound.file()
      if (current.status !== 'pending') throw new AppError('CONFLICT', `This upload is already ${current.status}`, { field: 'upload' })
      // Without a declared size nothing was reserved: the real size must fit now, atomically.
      if (current.declaredSize === null) quotas.assertFits(current.tenantId, current.workspaceId, size)
      settle()
      const now = clock.now()
      files.complete(fileId, size, staged.sha256, now)
      if (sealed && !objects?.setInfo(fileId, sealed.info)) throw new Error('UploadRecords.commit: a sealed upload needs its key recorded')
      // Its key (`<fileId>/<name>`) is its own: the first version of it, before its event reads it.
      if (versions && current.workspaceId !== null && current.objectKey !== null) {
        // A key chosen at the handshake (#31) may have a history (a delete marker current in a
        // versioned workspace): that stops being current first, as for an S3 write.
        if (!current.objectKey.startsWith(`${current.id}/`)) versions.retire(current.workspaceId, current.objectKey, now)
        versions.record(current.tenantId, current.workspaceId, current.objectKey, fileId, size, now)
      }
      events.settled(fileId)
      return files.get(fileId)!
    })
  }

  /**
   * pending → failed, releasing its reservation exactly once (the row leaves `pending` in the same
   * statement), with its `file.failed` event. False when the row was no longer pending.
   */
  fail(fileId: string, code: string, message: string): boolean {
    const { db, clock, files, events } = this.deps
    return engineOf(db).transaction(() => {
      if (!files.fail(fileId, clock.now())) return false
      events.settled(fileId, { code, message })
      return true
    })
  }

  /** Pending uploads whose URL expired before `before`, oldest first. */
  expiredPending(before: number, limit: number): FileRecord[] {
    return this.deps.files.expiredPending(before, limit)
  }
}
